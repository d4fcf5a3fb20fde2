"""Reading sessions written by other agents (Claude Code) into foldline timelines (R2.5)."""

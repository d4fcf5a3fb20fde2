"""Compaction (design.md §3): tool-result budget -> Snip -> Microcompact -> Collapse -> AutoCompact.

One module per level; each level is an independently testable stage.
"""

"""Containment: what a tool call may leave behind that runs, or is read, later outside the sandbox.

The policy the tool runner hands to Bash (`sandbox`: the bubblewrap command line, its environment
and limits), the host-side programs foldline itself runs (`programs`: found outside the workspace,
git hardened), the git state a command could turn into code (`git_state`), the workspace settings
a user has confirmed (`trust`), the paths whose writes always need a say-so (`paths`) and how
foldline reads on the host a file a command may have planted (`safe_read`). It
imports nothing of `tools/`, which builds on it (docs/design.md §9.4).
"""

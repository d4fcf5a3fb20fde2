"""Which paths are protected: writing them changes what runs, or what is trusted, later (§9.4).

Owns `is_protected_path`, the one answer the permission checker (which asks before such a write)
and the sandbox (which binds such paths read-only) share.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["is_protected_path"]

_PROTECTED_DIRS = frozenset({".git", ".foldline", ".claude", ".ssh", ".gnupg", ".aws", ".kube", ".docker"})
_SHELL_RC = frozenset(
    {".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
     ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".cshrc", ".tcshrc", ".inputrc", "config.fish",
     ".gitconfig", ".netrc", ".npmrc", ".pypirc", ".git-credentials"}
)  # fmt: skip


def is_protected_path(path: Path) -> bool:
    """Whether writing `path` always needs the user's say-so: VCS, agent config and transcripts,
    keys and credentials, shell startup. Names are compared case-folded, so `.GIT/config` on a
    case-insensitive filesystem is still `.git`."""
    parts = {p.casefold() for p in path.parts}
    return bool(_PROTECTED_DIRS.intersection(parts)) or path.name.casefold() in _SHELL_RC

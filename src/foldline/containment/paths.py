"""Which paths are protected: writing them changes what runs, or what is trusted, later (§9.4).

Owns `is_protected_path`, the one answer the permission checker (which asks before such a write)
and the sandbox (which binds such paths read-only) share, and `own_install`: foldline's own
package, the interpreter running it (its prefix: a venv's packages are what foldline imports) and
the `.pth` files its start-up runs. Where they lie inside the workspace (a project venv foldline
was installed into, an editable install of foldline's own checkout), a write there is code foldline
itself runs next time, outside the sandbox: the checker asks and the sandbox binds them read-only.
"""

from __future__ import annotations

import os
import site
import sys
from functools import lru_cache
from pathlib import Path

__all__ = ["HOME_SECRETS", "is_home_secret", "is_protected_path", "own_install"]

_PROTECTED_DIRS = frozenset({".git", ".foldline", ".claude", ".ssh", ".gnupg", ".aws", ".kube", ".docker"})
_SHELL_RC = frozenset(
    {".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
     ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".cshrc", ".tcshrc", ".inputrc", "config.fish",
     ".gitconfig", ".netrc", ".npmrc", ".pypirc", ".git-credentials"}
)  # fmt: skip

HOME_SECRETS = (".ssh", ".aws", ".gnupg", ".netrc", ".git-credentials", ".config/gh", ".docker/config.json",
                ".kube", ".npmrc", ".pypirc", ".password-store", ".local/share/keyrings")  # fmt: skip
"""Under the home, what holds keys, tokens and passwords: hidden from a sandboxed command, and a
read asks, even when the home is (inside) the workspace."""


def is_home_secret(path: Path, home: Path) -> bool:
    """Whether `path` (resolved) lies in one of the home's `HOME_SECRETS`."""
    real = Path(os.path.realpath(home))
    return any(path.is_relative_to(real / rel) for rel in HOME_SECRETS)


def is_protected_path(path: Path) -> bool:
    """Whether writing `path` always needs the user's say-so: VCS, agent config and transcripts,
    keys and credentials, shell startup. Names are compared case-folded, so `.GIT/config` on a
    case-insensitive filesystem is still `.git`."""
    parts = {p.casefold() for p in path.parts}
    return bool(_PROTECTED_DIRS.intersection(parts)) or path.name.casefold() in _SHELL_RC


_PACKAGE = Path(__file__).resolve().parents[1]
"""The `foldline` package folder this code runs from."""


def own_install(workspace: Path) -> tuple[Path, ...]:
    """foldline's package, the running interpreter and its prefix, and the `.pth` files of its
    site-packages folders (all resolved): those that lie inside `workspace`, none inside another."""
    found = _own_install(sys.prefix, sys.executable, str(_PACKAGE))
    root = os.path.realpath(workspace)
    inside = [p for p in found if p.is_relative_to(root)]
    return tuple(p for p in inside if not any(p != q and p.is_relative_to(q) for q in inside))


@lru_cache(maxsize=8)
def _own_install(prefix: str, executable: str, package: str) -> tuple[Path, ...]:
    found = [prefix, executable, package]
    for folder in (*site.getsitepackages([prefix]), site.getusersitepackages()):
        try:
            found += [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(".pth")]
        except OSError:
            continue
    return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in found if p))

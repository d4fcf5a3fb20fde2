"""The programs foldline itself runs on the host, outside the sandbox: found once, never in the
workspace, and git run so that nothing the workspace holds can make it run code (docs/design.md §9.4).

Owns `find_program` (an absolute path on PATH, skipping every PATH folder inside the workspace or
relative to the current directory) and `host_git` / `git_environment` (the argv and environment
of a host-side git call that only reads).

Why: a sandboxed command may write anything inside the workspace. A project venv on PATH
(`<ws>/.venv/bin`) would let it plant `rg`, `git` or `bwrap` there, and foldline would run the plant
on the host at the next Grep, permission check or start-up. And git trusts the repository it
opens: its config names programs (`core.fsmonitor`, `core.sshCommand`, filters), a partial clone
fetches missing objects through its promisor remote (`ext::` runs a command), hooks run on
writes. A host-side read needs none of that, so all of it is switched off on the command line,
which overrides every config file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

__all__ = ["GIT_HARDENING", "find_program", "git_environment", "host_git"]

_TRANSPORTS = ("ext", "fd", "file", "git", "http", "https", "ssh", "ftp", "ftps", "git+ssh", "ssh+git")
GIT_HARDENING: tuple[str, ...] = (
    "--no-optional-locks",
    "--no-replace-objects",
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.sshCommand=false",
    "-c", "core.gitProxy=",
    "-c", "core.pager=cat",
    "-c", "core.untrackedCache=false",
    "-c", "diff.external=",
    "-c", "log.showSignature=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "submodule.recurse=false",
    "-c", "diff.ignoreSubmodules=all",  # a status never runs git inside a nested repository
    "-c", "status.submoduleSummary=false",
    "-c", "protocol.allow=never",
    # a repository's `protocol.<name>.allow=always` outranks `protocol.allow`: name each one
    *(arg for name in _TRANSPORTS for arg in ("-c", f"protocol.{name}.allow=never")),
)  # fmt: skip
"""Options of every host-side git call: no program the repository names runs, no transport opens
(a partial clone's lazy fetch fails instead of running its promisor), no lock or gc writes."""


def find_program(name: str, workspace: Path | None = None) -> str | None:
    """The absolute path `name` resolves to on PATH, looking only in absolute folders outside
    `workspace` (resolved, symlinks included); a `name` with a slash is taken as given when it is
    absolute and outside the workspace. None when there is no such program."""
    return _find(name, None if workspace is None else os.path.realpath(workspace), os.environ.get("PATH", ""))


@lru_cache(maxsize=64)
def _find(name: str, workspace: str | None, path: str) -> str | None:
    def outside(candidate: str) -> bool:
        real = Path(os.path.realpath(candidate))
        return workspace is None or not real.is_relative_to(workspace)

    if "/" in name:
        return name if os.path.isabs(name) and outside(name) and os.access(name, os.X_OK) else None
    folders = [d for d in path.split(os.pathsep) if os.path.isabs(d) and outside(d)]
    found = shutil.which(name, path=os.pathsep.join(folders))
    return os.path.abspath(found) if found is not None and outside(found) else None


def git_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a host-side git call: none of the caller's `GIT_*` variables (they can
    point git at another repository, config or program), no system config, no prompts, and no
    lazy fetch (git 2.44 and later; older gits are held by `protocol.allow=never`)."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if not k.startswith("GIT_")}
    env.update(
        GIT_NO_LAZY_FETCH="1",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_PROTOCOL_FROM_USER="0",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_OPTIONAL_LOCKS="0",
    )
    return env


def host_git(git: str, top: Path, *args: str) -> list[str]:
    """The argv of a read-only git call in the repository at `top`, hardened (`GIT_HARDENING`)."""
    return [git, "-C", str(top), *GIT_HARDENING, *args]

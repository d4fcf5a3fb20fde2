"""Permission settings files: where rules and the default mode come from (R9.2).

The files are those Claude Code uses, under foldline's own directory name, read in this order:

| scope   | file                                      | shared?                     |
|---------|-------------------------------------------|-----------------------------|
| user    | `~/.foldline/settings.json`               | every project of this user  |
| project | `<workspace>/.foldline/settings.json`     | checked in with the project |
| local   | `<workspace>/.foldline/settings.local.json` | this checkout only        |

Each scope also reads `.claude/settings.json` / `.claude/settings.local.json` beside the foldline
file, so a project set up for Claude Code keeps its rules. A file holds
`{"permissions": {"allow": [...], "ask": [...], "deny": [...], "defaultMode": "..."}}`
(a top-level `defaultMode` is read too).

Invariants:
- Rules from every file are merged, never overridden: the checker evaluates deny before ask before
  allow, so a project `allow` can never cancel a user `deny`.
- `defaultMode` is taken from the most specific scope that sets it (local, then project, then
  user), except that a checked-in project file may not turn on `bypassPermissions`: cloning a
  repository must not switch every prompt off. That case is reported in `Settings.warnings`.
- A file inside the workspace (project or local scope) loosens nothing until the user confirmed
  it (`foldline.containment.trust`: created through foldline, `foldline trust`, or the prompt at
  chat's start): until then its allow rules, a `defaultMode` other than `default`/`plan` and its
  sandbox loosening are ignored with a warning; its deny and ask rules always hold. A cloned
  repository, or a command the agent ran, may have written it. `Settings.untrusted` lists them.
  Such a file is read once, as a regular file inside the workspace (`containment.safe_read`: no
  link out, no FIFO or device, bounded), and those very bytes are what the trust check hashes.
  Text from it in `Settings.warnings` has its control characters escaped.
- "Yes, always" answers are saved by `save_rule` to the local foldline file only.
- `sandbox` (the Bash sandbox, `foldline.containment.sandbox`) is `"auto"`, `"required"`, `"off"`,
  or an object `{"mode": ..., "network": bool, "homeReadable": [paths], "autoAllow": bool, "bwrap":
  path, "env": [names]}`; each key is taken from the most specific scope that sets it. A checked-in
  project file may only tighten it, confirmed or not; `bwrap` and `env` are read from the user's
  own file only (a workspace never names a program foldline runs, nor a secret it passes on).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from foldline._json import JSONDecodeError, dumps, loads
from foldline.containment.safe_read import escape_controls, read_regular_file, read_workspace_file
from foldline.containment.sandbox import SandboxMode, SandboxPolicy
from foldline.containment.trust import is_trusted, trust
from foldline.errors import UserError
from foldline.tools.permissions import Behavior, PermissionMode, PermissionRules, Rule

__all__ = [
    "Scope",
    "Settings",
    "SettingsSource",
    "describe_effect",
    "load_settings",
    "local_settings_path",
    "read_settings_bytes",
    "save_rule",
]

Scope = Literal["user", "project", "local"]
_LISTS: tuple[Behavior, ...] = ("allow", "ask", "deny")


@dataclass(frozen=True)
class SettingsSource:
    """Where one rule or the mode came from."""

    scope: Scope
    path: Path


@dataclass(frozen=True)
class Settings:
    """The merged permission settings of one workspace."""

    rules: PermissionRules = field(default_factory=PermissionRules)
    mode: PermissionMode | None = None
    """The `defaultMode` in force, or None when no file sets one."""
    rule_sources: Mapping[tuple[Behavior, str], SettingsSource] = field(default_factory=dict)
    """`(list, rule text)` -> the first file that holds it."""
    mode_source: SettingsSource | None = None
    files: tuple[SettingsSource, ...] = ()
    """Every settings file that was read, in reading order."""
    warnings: tuple[str, ...] = ()
    """Settings that were ignored, and why."""
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    """The Bash sandbox's settings (default: on where it works, no network)."""
    untrusted: tuple[Path, ...] = ()
    """Workspace settings files the user has not confirmed, whose loosening was ignored."""
    sandbox_source: SettingsSource | None = None
    """The file whose sandbox `mode` is in force, or None when no file sets one."""


def _files(workspace: Path, home: Path) -> list[SettingsSource]:
    return [
        SettingsSource("user", home / ".foldline" / "settings.json"),
        SettingsSource("user", home / ".claude" / "settings.json"),
        SettingsSource("project", workspace / ".foldline" / "settings.json"),
        SettingsSource("project", workspace / ".claude" / "settings.json"),
        SettingsSource("local", workspace / ".claude" / "settings.local.json"),
        SettingsSource("local", local_settings_path(workspace)),  # the file save_rule writes
    ]


def local_settings_path(workspace: Path) -> Path:
    """The file `save_rule` writes: `<workspace>/.foldline/settings.local.json`."""
    return workspace / ".foldline" / "settings.local.json"


def read_settings_bytes(path: Path, workspace: Path | None) -> bytes | None:
    """The bytes of a settings file, read once; None when there is none. Inside `workspace` only
    a regular file inside it counts (a link may point elsewhere inside it); the user's own files
    (`workspace` None) may be links anywhere.

    Raises:
        UserError: the file exists but is no regular file (inside the workspace), or is too big.
    """
    if not os.path.lexists(path):
        return None
    if workspace is None:
        raw = read_regular_file(path, follow_links=True)
    else:
        raw = read_workspace_file(path, workspace, follow_links=True)
    if raw is None:
        where = " inside the workspace" if workspace is not None else ""
        raise UserError(
            f"{escape_controls(str(path))}: not a regular settings file{where} (a link out of it, a FIFO "
            "or a device), or too big to read; remove it or replace it with the JSON file it should be"
        )
    return raw


def _read(path: Path, raw: bytes | None = None) -> dict[str, Any]:
    try:
        data = loads(path.read_bytes() if raw is None else raw)
    except JSONDecodeError as e:
        raise UserError(
            f"{path}: line {e.lineno}: not valid JSON ({e.msg}); fix or remove the settings file"
        ) from e
    except OSError as e:
        raise UserError(f"{path}: cannot read the settings file ({e.strerror})") from e
    if not isinstance(data, dict):
        raise UserError(f"{path}: a settings file holds a JSON object, not {type(data).__name__}")
    return data


def _rules_of(data: Mapping[str, Any], path: Path) -> dict[Behavior, list[str]]:
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict):
        raise UserError(f"{path}: `permissions` must be an object with allow / ask / deny lists")
    out: dict[Behavior, list[str]] = {}
    for name in _LISTS:
        items = permissions.get(name, [])
        if not isinstance(items, list) or not all(isinstance(r, str) for r in items):
            raise UserError(f"{path}: `permissions.{name}` must be a list of rule strings")
        for text in items:
            try:
                Rule.parse(text)
            except UserError as e:
                raise UserError(escape_controls(f"{path}: permissions.{name}: {e}")) from e
        out[name] = items
    return out


def _mode_of(data: Mapping[str, Any], path: Path) -> PermissionMode | None:
    permissions = data.get("permissions", {})
    mode = permissions.get("defaultMode") if isinstance(permissions, dict) else None
    mode = mode if mode is not None else data.get("defaultMode")
    if mode is None:
        return None
    modes = get_args(PermissionMode)
    if mode not in modes:
        raise UserError(f"{path}: defaultMode {mode!r} is not one of {', '.join(modes)}")
    return cast(PermissionMode, mode)


_SANDBOX_KEYS = {"mode": "mode", "network": "network", "homeReadable": "home_readable",
                 "autoAllow": "auto_allow", "bwrap": "bwrap", "env": "env"}  # fmt: skip


def _sandbox_of(data: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The `sandbox` keys this file sets, under `SandboxPolicy`'s field names."""
    raw = data.get("sandbox")
    if raw is None:
        return {}
    if isinstance(raw, bool):
        raw = {"mode": "auto" if raw else "off"}
    elif isinstance(raw, str):
        raw = {"mode": raw}
    if not isinstance(raw, dict) or not set(raw) <= set(_SANDBOX_KEYS):
        raise UserError(f"{path}: `sandbox` is a mode or an object with keys {', '.join(_SANDBOX_KEYS)}")
    out = {_SANDBOX_KEYS[k]: v for k, v in raw.items()}
    modes = get_args(SandboxMode)
    if "mode" in out and out["mode"] not in modes:
        raise UserError(f"{path}: sandbox mode {out['mode']!r} is not one of {', '.join(modes)}")
    for key in ("network", "auto_allow"):
        if key in out and not isinstance(out[key], bool):
            raise UserError(f"{path}: sandbox `{key}` must be true or false")
    paths = out.get("home_readable", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise UserError(f"{path}: sandbox `homeReadable` must be a list of paths")
    if "home_readable" in out:
        out["home_readable"] = tuple(paths)
    if not isinstance(out.get("bwrap", ""), str):
        raise UserError(f"{path}: sandbox `bwrap` must be a path")
    names = out.get("env", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UserError(f"{path}: sandbox `env` must be a list of variable names")
    if "env" in out:
        out["env"] = tuple(names)
    return out


def _loosening(keys: Mapping[str, Any]) -> list[str]:
    """The sandbox keys a checked-in project file may not set: each opens the sandbox."""
    return [
        key
        for key, value in keys.items()
        if (key == "mode" and value == "off")
        or (key in ("network", "auto_allow") and value is True)
        or key in ("home_readable", "bwrap", "env")
    ]


def _restrict(
    source: SettingsSource,
    rules: dict[Behavior, list[str]],
    mode: PermissionMode | None,
    sandbox: dict[str, Any],
    trusted: bool,
) -> tuple[dict[Behavior, list[str]], PermissionMode | None, dict[str, Any], list[str]]:
    """What a workspace file may set: everything tightening; loosening only once confirmed, and
    never `bypassPermissions` or a looser sandbox from a checked-in file, nor a program or secret
    from any. Returns the kept rules, mode and sandbox keys, and what was ignored."""
    ignored: list[str] = []
    if source.scope == "user":
        return rules, mode, sandbox, ignored
    programs = [k for k in ("bwrap", "env") if k in sandbox]
    loose = programs if source.scope == "local" and trusted else _loosening(sandbox)
    if loose:
        ignored.append(f"sandbox {', '.join(loose)}")
        sandbox = {k: v for k, v in sandbox.items() if k not in loose}
    if not trusted and rules.get("allow"):
        ignored.append(f"allow rules {', '.join(rules['allow'])}")
        rules = {**rules, "allow": []}
    too_loose = mode not in (None, "default", "plan") and (
        not trusted or (source.scope == "project" and mode == "bypassPermissions")
    )
    if too_loose:
        checked_in = source.scope == "project" and mode == "bypassPermissions"
        note = " (a checked-in project file may not set bypassPermissions)" if checked_in else ""
        ignored.append(f"defaultMode {mode}{note}")
        mode = None
    return rules, mode, sandbox, ignored


def load_settings(workspace: Path, *, home: Path | None = None) -> Settings:
    """Read and merge the settings files of `workspace` (see the module docstring).

    Raises:
        UserError: a settings file exists but is not valid JSON, or holds a malformed rule or mode;
            the message names the file.
    """
    home = Path.home() if home is None else home
    lists: dict[Behavior, list[str]] = {name: [] for name in _LISTS}
    sources: dict[tuple[Behavior, str], SettingsSource] = {}
    mode: PermissionMode | None = None
    mode_source: SettingsSource | None = None
    read: list[SettingsSource] = []
    warnings: list[str] = []
    sandbox_keys: dict[str, Any] = {}
    untrusted: list[Path] = []
    sandbox_source: SettingsSource | None = None
    for source in _files(workspace, home):
        raw = read_settings_bytes(source.path, None if source.scope == "user" else workspace)
        if raw is None:
            continue
        read.append(source)
        data = _read(source.path, raw)
        trusted = source.scope == "user" or is_trusted(source.path, home, raw)
        rules, found, sandbox, ignored = _restrict(
            source,
            _rules_of(data, source.path),
            _mode_of(data, source.path),
            _sandbox_of(data, source.path),
            trusted,
        )
        if ignored:
            why = "may not loosen this" if trusted else "is not confirmed by you"
            hint = "" if trusted else "; to confirm it, run `foldline trust` in the workspace"
            said = f"{source.path}: this {source.scope} file {why}"
            warnings.append(escape_controls(f"{said}; ignored {'; '.join(ignored)}{hint}"))
            if not trusted:
                untrusted.append(source.path)
        for name, items in rules.items():
            for text in items:
                if (name, text) not in sources:
                    sources[(name, text)] = source
                    lists[name].append(text)
        sandbox_keys.update(sandbox)  # files are read least specific first: later ones win
        if "mode" in sandbox:
            sandbox_source = source
        if found is not None:
            mode, mode_source = found, source
    return Settings(
        PermissionRules.from_lists(allow=lists["allow"], ask=lists["ask"], deny=lists["deny"]),
        mode,
        sources,
        mode_source,
        tuple(read),
        tuple(warnings),
        SandboxPolicy(**sandbox_keys),
        tuple(untrusted),
        sandbox_source,
    )


def save_rule(workspace: Path, rule: str, behavior: Behavior = "allow", *, home: Path | None = None) -> Path:
    """Add `rule` to a list of the local settings file (created if missing), keeping the rest of the
    file as it was; a rule already there is not added twice. Returns the file's path.

    Raises:
        UserError: `rule` is not a rule, or the existing file is not valid settings JSON.
    """
    Rule.parse(rule)
    path = local_settings_path(workspace)
    home = Path.home() if home is None else home
    # foldline writes it for the user: trusted after, unless it was an unconfirmed file before
    # (then confirming it is still the user's call: it may hold rules they never saw)
    raw = read_settings_bytes(path, workspace)
    keep_trusted = raw is None or is_trusted(path, home, raw)
    data = _read(path, raw) if raw is not None else {}
    permissions = data.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise UserError(f"{path}: `permissions` must be an object with allow / ask / deny lists")
    items = permissions.setdefault(behavior, [])
    if not isinstance(items, list):
        raise UserError(f"{path}: `permissions.{behavior}` must be a list of rule strings")
    if rule not in items:
        items.append(rule)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = dumps(data, indent=True) + b"\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".settings.", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(written)
    os.replace(tmp, path)  # readers see the old file or the new one, never half of it
    if keep_trusted:
        trust(path, home, written)  # what foldline wrote, not what a read-back finds
    return path


def describe_effect(path: Path, raw: bytes, workspace: Path) -> list[str]:
    """What the workspace settings file `path` holding `raw` would do once confirmed, one line per
    effect, control characters escaped (the trust prompt shows it before asking).

    Raises:
        UserError: `raw` is not a valid settings file.
    """
    local = path.name.endswith(".local.json")
    source = SettingsSource("local" if local else "project", path)
    data = _read(path, raw)
    rules, mode, sandbox, ignored = _restrict(
        source, _rules_of(data, path), _mode_of(data, path), _sandbox_of(data, path), True
    )
    verbs = {"allow": "allows without asking", "ask": "asks before", "deny": "denies"}
    said = [f"{verbs[name]}: {', '.join(items)}" for name, items in rules.items() if items]
    if mode is not None:
        said.append(f"sets the permission mode to {mode}")
    said += [f"sets sandbox {key} to {dumps(value).decode()}" for key, value in sandbox.items()]
    said += [f"ignored even when trusted: {what}" for what in ignored]
    return [escape_controls(line) for line in said] or ["changes nothing (no rules, mode or sandbox keys)"]

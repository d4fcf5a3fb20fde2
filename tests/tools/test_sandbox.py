"""The OS sandbox around Bash: what a command inside bubblewrap can and cannot do, the fallback where
bubblewrap cannot run, and the prompts a contained command no longer needs.

The containment tests run real commands under real bwrap; where bwrap cannot run on this machine
they skip and say why (CI installs bubblewrap, see .ci/run).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from foldline.containment.checkpoints import CheckpointStore
from foldline.containment.sandbox import Sandbox, SandboxPolicy, detect_sandbox
from foldline.containment.trust import trust
from foldline.errors import UserError
from foldline.settings import Settings, load_settings
from foldline.tools import PermissionRules, ToolContext, authorize, check_permission
from foldline.tools.base import ToolResult
from foldline.tools.bash import BashTool
from foldline.tools.permissions import rule_patterns

_PROBE = detect_sandbox(SandboxPolicy())
needs_bwrap = pytest.mark.skipif(not _PROBE.active, reason=f"bubblewrap cannot run here: {_PROBE.problem}")


@pytest.fixture
def repo(workspace: Path) -> Path:
    """A workspace that is a git repository, with foldline's and Claude Code's settings folders."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".foldline").mkdir()
    (workspace / ".claude").mkdir()
    (workspace / "README.md").write_text("hello\n")
    return workspace


def _sandbox(
    policy: SandboxPolicy | None = None, rules: PermissionRules | None = None, ws: Path | None = None
) -> Sandbox:
    read_only, hidden = rule_patterns(rules, ws) if rules is not None and ws is not None else ((), ())
    return detect_sandbox(policy or SandboxPolicy(), read_only=read_only, hidden=hidden)


def _bash(command: str, ctx: ToolContext) -> ToolResult:
    """Run `command` as the engine would in bypassPermissions mode, when the checker lets it.

    The checker sees through `sh -c` to a protected path and asks (nobody is there to answer, so
    that is a deny); interpreters' code it cannot read, so bypassPermissions lets them run: there
    the sandbox is all that stands between the command and the files."""

    async def go() -> ToolResult:
        turn = ctx.for_turn()  # each anyio.run is its own event loop: a fresh abort event
        decision = await authorize("Bash", {"command": command}, turn, None, "bypassPermissions", None)
        if decision.behavior != "allow":
            return ToolResult(f"refused by the checker: {decision.reason}", is_error=True)
        return await BashTool().run({"command": command}, turn)

    return anyio.run(go)


@pytest.mark.parametrize("lang", ["python3", "perl"])
def test_the_checker_alone_lets_an_interpreter_write_anywhere_in_bypass_mode(lang: str, repo: Path) -> None:
    # why the sandbox is needed: these run unattended, and only the sandbox can contain them
    command = _writer(lang, ".git/config")
    decision = check_permission(
        "Bash", {"command": command}, ToolContext(workspace=repo), mode="bypassPermissions"
    )
    assert decision.behavior == "allow"


def _writer(lang: str, target: str) -> str:
    """An interpreter one-liner that appends a line to `target`."""
    if lang == "python3":
        return f"python3 -c \"open('{target}', 'a').write('pwned\\n')\""
    if lang == "perl":
        return f'perl -e \'open(my $f, ">>", "{target}") or die $!; print $f "pwned\\n"\''
    return f"sh -c 'echo pwned >> {target}'"


def _opaque(shell: str) -> str:
    """`shell` run from an interpreter: the checker cannot read it, so only the sandbox holds it."""
    return (
        f"python3 -c \"import subprocess, sys; sys.exit(subprocess.run('{shell}', shell=True).returncode)\""
    )


LANGS = ("python3", "perl", "sh")
PROTECTED = (".git/config", ".git/hooks/pre-commit", ".foldline/settings.local.json", ".claude/settings.json")


@needs_bwrap
@pytest.mark.parametrize("lang", LANGS)
def test_a_one_liner_in_bypass_mode_cannot_write_outside_the_workspace(
    lang: str, repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    command = f"{_writer(lang, str(outside))} && cat {outside}"
    result = _bash(command, ToolContext(workspace=repo, sandbox=_sandbox()))
    assert "pwned" in str(result.content), result.content  # it ran: the private /tmp took the write
    assert not outside.exists(), result.content
    elsewhere = Path("/var/tmp") / f"foldline-sandbox-escape-{os.getpid()}-{lang}"  # not under /tmp
    try:
        command = f"echo started && {_writer(lang, str(elsewhere))}"
        blocked = _bash(command, ToolContext(workspace=repo, sandbox=_sandbox()))
        assert blocked.is_error, blocked.content
        assert "started" in str(blocked.content)  # it ran: the write failed, not the start
        assert not elsewhere.exists()
    finally:
        elsewhere.unlink(missing_ok=True)


@needs_bwrap
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("target", PROTECTED)
def test_a_one_liner_in_bypass_mode_cannot_write_a_protected_path(lang: str, target: str, repo: Path) -> None:
    path = repo / target
    before = path.read_bytes() if path.exists() else None
    result = _bash(
        f"echo started && {_writer(lang, target)}", ToolContext(workspace=repo, sandbox=_sandbox())
    )
    assert result.is_error, result.content
    if lang == "sh":  # the checker reads through `sh -c` and asks; nobody answers
        assert str(result.content).startswith("refused by the checker"), result.content
    else:
        assert "started" in str(result.content)  # it ran: the write failed, not the start
        assert "Read-only file system" in str(result.content)
        assert "Note: Bash runs in foldline's OS sandbox" in str(result.content)  # the model is told why
    assert (path.read_bytes() if path.exists() else None) == before


@needs_bwrap
def test_git_cannot_be_swapped_for_a_repository_the_command_wrote(repo: Path) -> None:
    shell = "echo started; mv .git .git-old; mkdir -p .git/hooks && echo pwned > .git/hooks/pre-commit"
    result = _bash(_opaque(shell), ToolContext(workspace=repo, sandbox=_sandbox()))
    assert result.is_error
    assert "started" in str(result.content), result.content  # it ran
    assert "Device or resource busy" in str(result.content)  # `.git` is a mount point
    assert not (repo / ".git-old").exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()


@needs_bwrap
def test_git_cannot_be_pointed_at_a_common_dir_the_command_wrote(repo: Path) -> None:
    # a `commondir` moves config and hooks with it: git would run this fsmonitor outside the sandbox
    script = (
        "import shutil; g = '.git/'; [shutil.copytree(g + d, g + 'evil/' + d) for d in ('objects', 'refs')];"
        " shutil.copy(g + 'HEAD', g + 'evil/HEAD');"
        " open(g + 'evil/config', 'w').write('[core]\\n\\tfsmonitor = \\'touch /tmp/pwned\\'\\n');"
        " open(g + 'commondir', 'w').write('evil')"
    )
    result = _bash(f'python3 -c "{script}"', ToolContext(workspace=repo, sandbox=_sandbox()))
    assert result.is_error, result.content
    assert "Read-only file system: '.git/commondir'" in str(result.content)
    assert not (repo / ".git" / "commondir").exists()  # the read-only placeholder went with the call
    status = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--git-common-dir"], capture_output=True, text=True
    )
    assert status.stdout.strip() == ".git"


@needs_bwrap
def test_missing_protected_folders_cannot_be_created_and_none_is_left_behind(workspace: Path) -> None:
    command = (
        "echo ran > ran.txt; mkdir -p .foldline .claude .git/hooks; echo {} > .foldline/settings.local.json; "
        "echo {} > .claude/settings.local.json"
    )
    result = _bash(_opaque(command), ToolContext(workspace=workspace, sandbox=_sandbox()))
    assert result.is_error, result.content
    assert sorted(p.name for p in workspace.iterdir()) == ["ran.txt"]  # it ran; nothing else is left


@pytest.fixture
def listener() -> Iterator[tuple[int, list[socket.socket]]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))  # a free port, never a fixed one
    server.listen()
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()
    for conn in accepted:
        conn.close()


def _connect(port: int) -> str:
    return f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\""


@needs_bwrap
def test_a_one_liner_cannot_reach_a_listener_on_the_hosts_loopback(
    repo: Path, listener: tuple[int, list[socket.socket]]
) -> None:
    port, accepted = listener
    result = _bash(_connect(port), ToolContext(workspace=repo, sandbox=_sandbox()))
    assert result.is_error
    assert "Connection refused" in str(result.content), result.content
    assert accepted == []


@needs_bwrap
@pytest.mark.skipif(not os.access("/run", os.W_OK), reason="needs a writable /run for the test socket")
def test_a_daemons_socket_under_run_is_out_of_reach(repo: Path) -> None:
    path = Path("/run") / f"foldline-sandbox-test-{os.getpid()}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        script = f"import socket; socket.socket(socket.AF_UNIX).connect('{path}')"
        result = _bash(f'python3 -c "{script}"', ToolContext(workspace=repo, sandbox=_sandbox()))
        assert result.is_error
        assert "No such file or directory" in str(result.content), result.content
    finally:
        server.close()
        path.unlink()


@needs_bwrap
def test_the_network_setting_opens_it(repo: Path, listener: tuple[int, list[socket.socket]]) -> None:
    port, accepted = listener
    result = _bash(_connect(port), ToolContext(workspace=repo, sandbox=_sandbox(SandboxPolicy(network=True))))
    assert not result.is_error, result.content
    assert len(accepted) == 1


@needs_bwrap
def test_workspace_writes_and_git_still_work(repo: Path) -> None:
    ctx = ToolContext(workspace=repo, sandbox=_sandbox())
    result = _bash(
        "mkdir -p src && python3 -c \"open('src/a.py', 'w').write('x = 1')\" && git status --short", ctx
    )
    assert not result.is_error, result.content
    assert (repo / "src" / "a.py").read_text() == "x = 1"
    assert "?? README.md" in str(result.content)
    assert "?? src/" in str(result.content)
    commit = "git add -A && git -c user.name=t -c user.email=t@t commit -qm one && git log --oneline | wc -l"
    result = _bash(commit, ctx)
    assert not result.is_error, result.content
    assert str(result.content).startswith("1\n"), result.content


def _git(*args: str | Path) -> None:
    subprocess.run(["git", *map(str, args)], check=True, capture_output=True)


@needs_bwrap
def test_git_status_works_in_a_subfolder_of_a_repository_whose_git_dir_stays_read_only(
    tmp_path: Path,
) -> None:
    outer = tmp_path / "repo"
    (outer / "pkg").mkdir(parents=True)
    _git("init", "-q", outer)
    (outer / "pkg" / "a.py").write_text("x = 1\n")
    before = (outer / ".git" / "config").read_bytes()
    ctx = ToolContext(workspace=outer / "pkg", sandbox=_sandbox())
    result = _bash("git status --short", ctx)
    assert not result.is_error, result.content
    assert str(result.content).startswith("?? ./"), result.content
    assert _bash("echo '[core] fsmonitor = evil' >> ../.git/config", ctx).is_error
    assert (outer / ".git" / "config").read_bytes() == before
    assert sorted(p.name for p in (outer / "pkg").iterdir()) == ["a.py"]


@needs_bwrap
def test_git_status_works_in_a_worktree(repo: Path, tmp_path: Path) -> None:
    _git(
        "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one"
    )
    tree = tmp_path / "tree"
    _git("-C", repo, "worktree", "add", "-q", tree)
    (tree / "new.txt").write_text("n")
    result = _bash("git status --short && git log --oneline", ToolContext(workspace=tree, sandbox=_sandbox()))
    assert not result.is_error, result.content
    assert "?? new.txt" in str(result.content)
    assert " one" in str(result.content)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home directory outside /tmp (which is private in the sandbox anyway), with a secret."""
    home = Path("/var/tmp") / f"foldline-home-{os.getpid()}"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("SECRET")
    (home / ".cargo").mkdir()
    (home / ".cargo" / "config.toml").write_text("shared")
    monkeypatch.setenv("HOME", str(home))
    try:
        yield home
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=True)


@needs_bwrap
@pytest.mark.parametrize("inside", [False, True], ids=["workspace-elsewhere", "workspace-in-home"])
def test_the_home_is_hidden_except_what_the_settings_allow(inside: bool, repo: Path, home: Path) -> None:
    workspace = repo
    if inside:
        workspace = home / "project"
        workspace.mkdir()
    ctx = ToolContext(workspace=workspace, sandbox=_sandbox(SandboxPolicy(home_readable=("~/.cargo",))))
    assert _bash("cat ~/.ssh/id_rsa", ctx).is_error
    assert "shared" in str(_bash("cat ~/.cargo/config.toml", ctx).content)
    assert _bash("echo x >> ~/.cargo/config.toml", ctx).is_error
    assert (home / ".cargo" / "config.toml").read_text() == "shared"
    assert not _bash("echo kept > made.txt", ctx).is_error
    assert (workspace / "made.txt").read_text() == "kept\n"


def _tool(path: Path, says: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {says}\n")
    path.chmod(0o755)


@needs_bwrap
def test_the_homes_toolchains_run_in_the_sandbox_read_only_and_its_secrets_stay_hidden(
    repo: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tool(home / ".cargo" / "bin" / "cargo", "cargo-from-rustup")
    _tool(home / ".pyenv" / "shims" / "python9", "python-from-pyenv")
    (home / ".cargo" / "credentials.toml").write_text("token = 'REGISTRY-SECRET'")
    path = f"{home}/.cargo/bin:{home}/.pyenv/shims:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("PYENV_VERSION", "3.11.7")  # the version managers' own variables pass too
    ctx = ToolContext(workspace=repo, sandbox=_sandbox())
    ran = _bash("cargo --version; python9; echo pyenv=$PYENV_VERSION", ctx)
    assert not ran.is_error, ran.content
    assert "pyenv=3.11.7" in str(ran.content)
    assert "cargo-from-rustup" in str(ran.content)
    assert "python-from-pyenv" in str(ran.content)
    assert _bash("echo x >> ~/.cargo/bin/cargo", ctx).is_error  # read-only
    assert (home / ".cargo" / "bin" / "cargo").read_text().endswith("cargo-from-rustup\n")
    secrets = _bash("echo started; cat ~/.cargo/credentials.toml ~/.ssh/id_rsa ~/.cargo/config.toml", ctx)
    assert "started" in str(secrets.content)
    assert "SECRET" not in str(secrets.content)
    assert "shared" not in str(secrets.content)  # only ~/.cargo/bin of ~/.cargo


@needs_bwrap
def test_a_read_deny_rule_still_hides_a_file_in_a_toolchain_folder(repo: Path, home: Path) -> None:
    _tool(home / ".local" / "bin" / "deploy", "deploy")
    (home / ".local" / "bin" / "deploy.token").write_text("TOKEN-SECRET")
    rules = PermissionRules.from_lists(deny=[f"Read(/{home}/.local/bin/deploy.token)"])
    ctx = ToolContext(workspace=repo, sandbox=_sandbox(rules=rules, ws=repo))
    result = _bash(_opaque("cat ~/.local/bin/deploy; cat ~/.local/bin/deploy.token"), ctx)
    assert "echo deploy" in str(result.content)  # the folder is bound
    assert "TOKEN-SECRET" not in str(result.content)


@needs_bwrap
def test_a_program_the_hidden_home_holds_fails_with_a_note_naming_the_setting(
    repo: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tool(home / ".sdkman" / "bin" / "sdk9", "sdk")
    monkeypatch.setenv("PATH", f"{home}/.sdkman/bin:{os.environ['PATH']}")
    ctx = ToolContext(workspace=repo, sandbox=_sandbox())
    result = _bash("sdk9 version", ctx)
    assert result.is_error
    assert "command not found" in str(result.content)
    note = str(result.content).split("Note:", 1)[-1]
    assert f"`sdk9` exists on the host ({home}/.sdkman/bin/sdk9)" in note
    assert '{"sandbox": {"homeReadable": ["~/.sdkman"]}}' in note
    missing = _bash("nosuchprogram9", ctx)  # what the host lacks too gets no such note
    assert missing.is_error
    assert "exists on the host" not in str(missing.content)
    allowed = ToolContext(workspace=repo, sandbox=_sandbox(SandboxPolicy(home_readable=("~/.sdkman",))))
    assert "sdk" in str(_bash("sdk9 version", allowed).content)


@needs_bwrap
def test_paths_rules_protect_are_read_only_or_hidden(repo: Path) -> None:
    (repo / "deploy").mkdir()
    (repo / "deploy" / "prod.yml").write_text("prod")
    (repo / "sub").mkdir()
    (repo / "sub" / ".env").write_text("KEY=secret")
    outside = Path("/var/tmp") / f"foldline-sandbox-hidden-{os.getpid()}"  # readable unless hidden
    outside.write_text("TOKEN=secret")
    try:
        rules = PermissionRules.from_lists(
            deny=["Edit(/deploy/**)", "Read(.env)", f"Read(/{outside})", "Edit(//etc/**)"]
        )
        ctx = ToolContext(workspace=repo, sandbox=_sandbox(rules=rules, ws=repo))
        # interpreters: the checker cannot see these accesses, only the sandbox stops them
        result = _bash("python3 -c \"open('deploy/prod.yml', 'w').write('x')\"", ctx)
        assert "Read-only file system" in str(result.content), result.content
        assert (repo / "deploy" / "prod.yml").read_text() == "prod"
        for path in ("sub/.env", str(outside)):
            result = _bash(f"python3 -c \"print(repr(open('{path}').read()))\"", ctx)
            assert result.is_error  # /dev/null in its place, on a mount without device access
            assert "Permission denied" in str(result.content), result.content
            assert "secret" not in str(result.content)
    finally:
        outside.unlink()


@needs_bwrap
def test_the_command_has_no_capabilities_even_as_root(repo: Path) -> None:
    # as root, bwrap would keep every capability inside, and `mount -o remount,rw` undoes a bind
    result = _bash("grep CapEff /proc/self/status", ToolContext(workspace=repo, sandbox=_sandbox()))
    assert str(result.content).split()[1] == "0000000000000000", result.content


@needs_bwrap
def test_a_timeout_or_the_shells_exit_takes_the_whole_tree_down(repo: Path) -> None:
    marker = f"foldline-sandbox-sleep-{os.getpid()}"
    ctx = ToolContext(workspace=repo, sandbox=_sandbox())
    timed = anyio.run(
        BashTool().run, {"command": f"exec -a {marker} sleep 60", "timeout": 1000}, ctx.for_turn()
    )
    assert timed.structured is not None
    assert timed.structured["outcome"] == "timeout"
    # the shell is the pid namespace's main process: when it exits, the kernel kills the rest
    background = _bash(f"(exec -a {marker} sleep 60) & echo started", ctx)
    assert not background.is_error, background.content
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left == ""


# --- where bubblewrap cannot run ---------------------------------------------------------------


def test_a_missing_binary_is_said_once_and_bash_runs_with_the_checker_alone(
    workspace: Path, tmp_path: Path
) -> None:
    sandbox = detect_sandbox(SandboxPolicy(bwrap=str(tmp_path / "no-such-bwrap")))
    assert not sandbox.active
    assert not sandbox.refuses
    notice = sandbox.notice()
    assert notice is not None
    assert "cannot run here" in notice
    assert "no-such-bwrap" in notice
    assert "permission checker alone" in notice
    result = anyio.run(
        BashTool().run, {"command": "echo plain"}, ToolContext(workspace=workspace, sandbox=sandbox)
    )
    assert not result.is_error
    assert "plain" in str(result.content)


def test_no_bwrap_on_path_is_detected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without bwrap
    sandbox = detect_sandbox(SandboxPolicy())
    assert not sandbox.active
    assert "bubblewrap is not installed" in str(sandbox.notice())


def test_a_bwrap_that_fails_is_not_trusted(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    sandbox = detect_sandbox(SandboxPolicy(bwrap=str(fake)))
    assert not sandbox.active
    assert "No permissions to creating new namespace" in str(sandbox.notice())


def test_required_refuses_bash_where_the_sandbox_cannot_run(workspace: Path, tmp_path: Path) -> None:
    sandbox = detect_sandbox(SandboxPolicy(mode="required", bwrap=str(tmp_path / "missing")))
    assert sandbox.refuses
    ctx = ToolContext(workspace=workspace, sandbox=sandbox)
    result = anyio.run(BashTool().run, {"command": "touch made"}, ctx)
    assert result.is_error
    assert "Bash is refused" in str(result.content)
    assert "required" in str(result.content)
    assert not (workspace / "made").exists()
    decision = check_permission("Bash", {"command": "ls"}, ctx, mode="bypassPermissions")
    assert decision.behavior == "deny"  # refused up front: nobody is asked about a call that cannot run
    assert "required" in decision.reason


def test_off_is_silent_and_unsandboxed(tmp_path: Path) -> None:
    sandbox = detect_sandbox(SandboxPolicy(mode="off"))
    assert not sandbox.active
    assert not sandbox.refuses
    assert sandbox.notice() is None


# --- prompts the sandbox makes moot ------------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize(
    "command",
    ["python3 -c 'print(1)'", "npm test", "echo x > notes.txt", "mkdir build && touch build/x",
     "sed -i s/a/b/ README.md", "make", "X=1 ./run.sh"],
)  # fmt: skip
def test_a_contained_command_runs_without_asking(command: str, repo: Path) -> None:
    plain = check_permission("Bash", {"command": command}, ToolContext(workspace=repo))
    assert plain.behavior == "ask", plain
    layered = detect_sandbox(SandboxPolicy(), workspace=repo)
    store = CheckpointStore(repo, "t")
    sandboxed = check_permission(
        "Bash", {"command": command}, ToolContext(workspace=repo, sandbox=layered, checkpoints=store)
    )
    assert sandboxed.behavior == "allow", sandboxed
    assert "OS sandbox" in sandboxed.reason


@needs_bwrap
@pytest.mark.parametrize(
    ("command", "asks"),
    [("sed -i s/a/b/ README.md", True), ("rm README.md", True), ("echo x > README.md", True),
     ("echo x > new.txt", False), ("mkdir build && touch build/x", False), ("npm test", False)],
)  # fmt: skip
def test_without_a_layer_a_command_that_deletes_or_overwrites_asks(
    command: str, asks: bool, repo: Path
) -> None:
    unlayered = _sandbox()  # no workspace given: no layer, so nothing could undo a deletion
    assert unlayered.active
    assert not unlayered.layered
    decision = check_permission("Bash", {"command": command}, ToolContext(workspace=repo, sandbox=unlayered))
    assert decision.behavior == ("ask" if asks else "allow"), decision
    if asks:
        assert "nothing can undo" in decision.reason


@needs_bwrap
@pytest.mark.parametrize(
    "command",
    ["echo x > /etc/motd", "echo x >> .git/config", "cp a ~/.bashrc", "cat /etc/hostname", "rm -rf ../other"],
)
def test_what_leaves_the_workspace_or_touches_a_protected_path_still_asks(command: str, repo: Path) -> None:
    decision = check_permission("Bash", {"command": command}, ToolContext(workspace=repo, sandbox=_sandbox()))
    assert decision.behavior == "ask", decision


@needs_bwrap
def test_rules_still_decide_first(repo: Path) -> None:
    rules = PermissionRules.from_lists(deny=["Bash(npm publish:*)"], ask=["Bash(make:*)"])
    ctx = ToolContext(workspace=repo, sandbox=_sandbox())
    assert check_permission("Bash", {"command": "npm publish"}, ctx, rules).behavior == "deny"
    assert check_permission("Bash", {"command": "make deploy"}, ctx, rules).behavior == "ask"
    assert check_permission("Bash", {"command": "ls; make deploy"}, ctx, rules).behavior == "ask"


@needs_bwrap
@pytest.mark.parametrize("policy", [SandboxPolicy(auto_allow=False), SandboxPolicy(network=True)])
def test_auto_allow_is_off_when_turned_off_or_with_the_network_on(policy: SandboxPolicy, repo: Path) -> None:
    ctx = ToolContext(workspace=repo, sandbox=_sandbox(policy))
    assert check_permission("Bash", {"command": "npm test"}, ctx).behavior == "ask"


@needs_bwrap
def test_what_the_checker_protects_at_the_top_of_the_workspace_is_read_only(repo: Path) -> None:
    (repo / ".npmrc").write_text("registry=https://registry.npmjs.org/\n")
    (repo / ".bashrc").write_text("")
    script = "open('.npmrc', 'a').write('node-options=--require ./evil.js')"
    result = _bash(f'python3 -c "{script}"', ToolContext(workspace=repo, sandbox=_sandbox()))
    assert "Read-only file system" in str(result.content), result.content
    assert (repo / ".npmrc").read_text() == "registry=https://registry.npmjs.org/\n"


def test_an_unavailable_sandbox_allows_nothing_more(repo: Path, tmp_path: Path) -> None:
    sandbox = detect_sandbox(SandboxPolicy(bwrap=str(tmp_path / "missing")))
    ctx = ToolContext(workspace=repo, sandbox=sandbox)
    assert check_permission("Bash", {"command": "npm test"}, ctx).behavior == "ask"


# --- settings ----------------------------------------------------------------------------------


def _settings(
    tmp_path: Path, project: str | None = None, local: str | None = None, user: str | None = None
) -> Settings:
    ws, home = tmp_path / "ws", tmp_path / "home"
    files = {"settings.json": project, "settings.local.json": local}
    for text, path in (
        *((t, ws / ".foldline" / n) for n, t in files.items()),
        (user, home / ".foldline" / "settings.json"),
    ):
        if text is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            trust(path, home)  # the user's own: a confirmed project file still may not loosen
    ws.mkdir(exist_ok=True)
    return load_settings(ws, home=home)


def test_sandbox_settings_default_to_on_without_network(tmp_path: Path) -> None:
    assert _settings(tmp_path).sandbox == SandboxPolicy()


def test_sandbox_settings_take_a_mode_or_an_object_most_specific_scope_first(tmp_path: Path) -> None:
    assert _settings(tmp_path, local='{"sandbox": "required"}').sandbox.mode == "required"
    assert _settings(tmp_path, local='{"sandbox": false}').sandbox.mode == "off"
    policy = _settings(
        tmp_path,
        user='{"sandbox": {"network": true, "homeReadable": ["~/.cargo"], "mode": "required", '
        '"bwrap": "/opt/bwrap"}}',
        local='{"sandbox": {"mode": "auto"}}',
    ).sandbox
    assert policy == SandboxPolicy("auto", True, ("~/.cargo",), True, "/opt/bwrap")


def test_no_workspace_file_names_the_sandboxs_program_or_passes_a_secret(tmp_path: Path) -> None:
    # even the user's confirmed local file: the workspace is where a command may write
    settings = _settings(
        tmp_path, local='{"sandbox": {"bwrap": "./bwrap", "env": ["AWS_SECRET_ACCESS_KEY"]}}'
    )
    assert settings.sandbox == SandboxPolicy()
    assert "ignored sandbox bwrap, env" in settings.warnings[0]


def test_a_checked_in_project_file_may_tighten_the_sandbox_but_not_loosen_it(tmp_path: Path) -> None:
    tight = _settings(tmp_path, project='{"sandbox": {"mode": "required", "autoAllow": false}}')
    assert tight.sandbox == SandboxPolicy(mode="required", auto_allow=False)
    assert tight.warnings == ()
    loose = _settings(
        tmp_path,
        project='{"sandbox": {"mode": "off", "network": true, "homeReadable": ["~/.ssh"], "bwrap": "./x"}}',
    )
    assert loose.sandbox == SandboxPolicy()
    assert len(loose.warnings) == 1
    assert "may not loosen this; ignored sandbox mode, network, home_readable, bwrap" in loose.warnings[0]


@pytest.mark.parametrize(
    "text", ['{"sandbox": "sometimes"}', '{"sandbox": {"net": true}}', '{"sandbox": {"network": "yes"}}',
             '{"sandbox": {"homeReadable": "~/.cargo"}}', '{"sandbox": 3}'],
)  # fmt: skip
def test_a_malformed_sandbox_setting_names_the_file(tmp_path: Path, text: str) -> None:
    with pytest.raises(UserError, match=r"settings\.local\.json.*sandbox"):
        _settings(tmp_path, local=text)


# --- foldline chat says it once ----------------------------------------------------------------


def _chat_output(tmp_path: Path, settings: str | None) -> str:
    from click.testing import CliRunner

    from foldline.cli import cli
    from foldline.server.app import create_app
    from foldline.server.backend import ScriptedBackend
    from foldline.server.testing import run_server

    ws = tmp_path / "ws"
    (ws / ".foldline").mkdir(parents=True, exist_ok=True)
    if settings is not None:
        (ws / ".foldline" / "settings.local.json").write_text(settings)
    with run_server(create_app(backend=ScriptedBackend())) as url:
        result = CliRunner().invoke(
            cli, ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(ws),
                  "--sessions-dir", str(tmp_path / "sessions"), "-p", "hi"],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def test_chat_says_once_that_the_sandbox_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    (home / ".foldline").mkdir(parents=True)
    user = home / ".foldline" / "settings.json"  # only the user's own file may name the binary
    user.write_text('{"sandbox": {"bwrap": "/nonexistent/bwrap"}}')
    output = _chat_output(tmp_path, None)
    assert output.count("the Bash sandbox cannot run here") == 1, output
    assert "permission checker alone" in output
    user.write_text('{"sandbox": {"mode": "required", "bwrap": "/nonexistent/bwrap"}}')
    required = _chat_output(tmp_path, None)
    assert required.count("Bash is refused") == 1, required


@needs_bwrap
def test_chat_says_once_what_the_sandbox_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from foldline.cli import cli
    from foldline.server.app import create_app
    from foldline.server.backend import ScriptedBackend
    from foldline.server.testing import run_server

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert "bubblewrap sandbox" not in _chat_output(tmp_path, None)  # -p prints the answer alone
    with run_server(create_app(backend=ScriptedBackend())) as url:
        result = CliRunner().invoke(
            cli, ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(tmp_path / "ws"),
                  "--sessions-dir", str(tmp_path / "sessions"), "--repl"],
            input="/exit\n",
        )  # fmt: skip
    output = result.output
    assert output.count("Bash runs in a bubblewrap sandbox") == 1, output
    line = next(x for x in output.splitlines() if "bubblewrap sandbox" in x)
    assert "no network" in line
    assert "run without asking" in line


@needs_bwrap
def test_a_workspace_that_is_the_home_keeps_its_secrets_hidden_and_config_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cd ~ && foldline chat`: the workspace bind undoes the hidden home, so the home's keys and
    tokens are hidden again and what other programs read as config stays read-only."""
    home = tmp_path / "me"
    secrets = {
        ".ssh/id_ed25519": "ssh-SECRET",
        ".aws/credentials": "aws-SECRET",
        ".netrc": "netrc-SECRET",
        ".git-credentials": "https://me:gitcred-SECRET@example.com",
        ".config/gh/hosts.yml": "gh-SECRET",
        ".docker/config.json": "docker-SECRET",
    }
    config = {".bashrc": "# mine\n", ".gitconfig": "[user]\n\tname = me\n", ".config/git/config": "[x]\n"}
    for rel, text in {**secrets, **config}.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    monkeypatch.setenv("HOME", str(home))
    ctx = ToolContext(workspace=home, sandbox=_sandbox())
    reads = "; ".join(f"cat {rel}" for rel in secrets)
    writes = "; ".join(f"echo pwned >> {rel}" for rel in config)
    result = _bash(_opaque(f"echo started; {reads}; {writes}; echo work > notes.txt"), ctx)
    assert "started" in str(result.content), result.content  # it ran
    assert "SECRET" not in str(result.content)
    assert (home / "notes.txt").read_text() == "work\n"  # the workspace itself is writable
    assert {rel: (home / rel).read_text() for rel in config} == config
    assert {rel: (home / rel).read_text() for rel in secrets} == secrets


@pytest.fixture
def own_venv(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """foldline installed into a venv inside the workspace, with an editable-style `.pth`."""
    from foldline.containment import paths

    venv = workspace / ".venv"
    site_packages = (
        venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    )
    (site_packages / "foldline").mkdir(parents=True)
    (site_packages / "foldline" / "engine.py").write_text("# foldline\n")
    (site_packages / "_foldline.pth").write_text(f"{workspace / 'src'}\n")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").write_text("")
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(paths, "_PACKAGE", site_packages / "foldline")
    return site_packages


def test_the_checker_asks_before_writing_foldlines_own_code_in_the_workspace(
    workspace: Path, own_venv: Path
) -> None:
    ctx = ToolContext(workspace=workspace)
    for target in (own_venv / "foldline" / "engine.py", own_venv / "_foldline.pth", own_venv / "other.py"):
        decision = check_permission("Write", {"file_path": str(target)}, ctx, mode="acceptEdits")
        assert decision.behavior == "ask", target
        assert "foldline's own code or interpreter" in decision.reason
    ordinary = check_permission("Write", {"file_path": str(workspace / "app.py")}, ctx, mode="acceptEdits")
    assert ordinary.behavior == "allow"  # the same check, on a file of the project


@needs_bwrap
def test_the_sandbox_holds_foldlines_own_code_in_the_workspace_read_only(
    workspace: Path, own_venv: Path
) -> None:
    ctx = ToolContext(workspace=workspace, sandbox=_sandbox())
    engine, pth = own_venv / "foldline" / "engine.py", own_venv / "_foldline.pth"
    command = f"echo started; echo pwned >> {engine}; echo pwned >> {pth}; echo ok > app.py"
    result = _bash(_opaque(command), ctx)
    assert "started" in str(result.content), result.content
    assert str(result.content).count("Read-only file system") == 2
    assert (workspace / "app.py").read_text() == "ok\n"
    assert engine.read_text() == "# foldline\n"
    assert "pwned" not in pth.read_text()


def test_a_workspace_that_is_the_home_still_asks_before_reading_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "me"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key")
    (home / "notes.txt").write_text("notes")
    monkeypatch.setenv("HOME", str(home))
    for workspace in (home, tmp_path):  # the home itself, and a folder that holds it
        ctx = ToolContext(workspace=workspace)
        key = check_permission("Read", {"file_path": str(home / ".ssh" / "id_ed25519")}, ctx)
        assert key.behavior == "ask", workspace
        assert "keys or tokens of your home folder" in key.reason
        notes = check_permission("Read", {"file_path": str(home / "notes.txt")}, ctx)
        assert notes.behavior == "allow"  # the same check lets the rest of the workspace be read
        bash = check_permission("Bash", {"command": f"cat {home / '.ssh' / 'id_ed25519'}"}, ctx)
        assert bash.behavior == "ask"


_PEP_668 = (
    "error: externally-managed-environment\n\n× This environment is externally managed\n"
    "╰─> To install Python packages system-wide, try apt install python3-xyz\n"
)


def test_pip_refused_by_an_externally_managed_python_gets_a_note_on_a_venv_in_the_workspace(
    workspace: Path,
) -> None:
    from foldline.tools.bash import _explain_sandbox

    ctx = ToolContext(workspace=workspace, sandbox=_sandbox())
    refused = ToolResult(f"[stderr]\n{_PEP_668}Exit code: 1", is_error=True, structured={"exit_code": 1})
    text = str(_explain_sandbox("pip install requests", refused, ctx).content)
    assert text.startswith(f"[stderr]\n{_PEP_668}")  # the output stays as it was
    assert "Note: Bash runs in foldline's OS sandbox" in text
    assert "python3 -m venv .venv && .venv/bin/pip install NAME" in text
    assert "The sandbox has no network" in text  # offline by default: say what pip can reach
    online = ToolContext(workspace=workspace, sandbox=_sandbox(SandboxPolicy(network=True)))
    assert "no network" not in str(_explain_sandbox("pip install requests", refused, online).content)
    installed = ToolResult("Successfully installed requests", structured={"exit_code": 0})
    assert _explain_sandbox("pip install requests", installed, ctx) is installed  # no note when it worked


def _externally_managed_python() -> str | None:
    """A system Python that refuses pip installs (PEP 668) and has pip, or None."""
    python = "/usr/bin/python3"
    probe = (
        "import sys, sysconfig, pathlib, pip\n"
        "sys.exit(not pathlib.Path(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED').exists())"
    )
    try:
        ok = subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return None
    return python if ok else None


@needs_bwrap
def test_a_real_pip_install_into_the_system_python_inside_the_sandbox_says_what_to_do(
    workspace: Path,
) -> None:
    python = _externally_managed_python()
    if python is None:
        pytest.skip("no externally managed system Python with pip here")
    result = _bash(f"{python} -m pip install requests", ToolContext(workspace=workspace, sandbox=_sandbox()))
    assert result.is_error, result.content
    assert "externally-managed-environment" in str(result.content)  # pip itself refused
    assert "python3 -m venv .venv" in str(result.content)

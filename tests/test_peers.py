"""benchmarks/peers.py: the real clients play the economics user and come back as economics rows.

The fast tests check how a request-log line is priced and how an opencode turn's answer is read;
the slow one runs peers.py for 3 turns of `feature` with each client (installed from npm into the
interop cache, `foldline.interop`), skipping only where the client cannot be installed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._benchmarks import BENCHMARKS, load_benchmark

from foldline import interop
from foldline.fleet import RUN_KEYS
from foldline.server.simulated.profiles import planted_facts
from foldline.simulation import SimulationReport, score_facts

SRC = Path(__file__).resolve().parents[1] / "src"


econ = load_benchmark("economics")
peers = load_benchmark("peers")


def test_a_logged_answer_is_metered_as_the_server_billed_it() -> None:
    entry = {
        "method": "POST",
        "path": "/v1/messages",
        "status": 200,
        "model": "claude-sonnet-4-5",
        "tools": 12,
        "usage": {
            "input_tokens": 10,
            "cache_read_input_tokens": 9000,
            "cache_creation_input_tokens": 500,
            "cache_creation": {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 200},
            "output_tokens": 40,
        },
    }
    request = peers.metered(entry)
    assert (request.input, request.cache_read, request.cache_write, request.cache_write_1h) == (
        10,
        9000,
        500,
        200,
    )
    assert (request.output, request.model, request.status, request.prompt) == (
        40,
        "claude-sonnet-4-5",
        None,
        9510,
    )
    assert peers.is_main(entry, "claude-sonnet-4-5")
    assert not peers.is_main({**entry, "tools": 0}, "claude-sonnet-4-5")  # a title or summary request
    assert not peers.is_main({**entry, "model": "claude-haiku-4-5"}, "claude-sonnet-4-5")
    refused = peers.metered(
        {"path": "/v1/messages", "status": 400, "error": "prompt is too long: 201234 tokens > 200000 maximum"}
    )
    assert (refused.status, refused.prompt) == (400, 201234)


def test_opencode_s_answer_is_its_last_message_s_text() -> None:
    events = [
        {"type": "text", "part": {"messageID": "m1", "text": "Running it now."}},
        {"type": "tool_use", "part": {"messageID": "m1", "type": "tool"}},
        {"type": "text", "part": {"messageID": "m2", "text": "The staging port "}},
        {"type": "text", "part": {"messageID": "m2", "text": "is 6543."}},
    ]
    assert interop.answer(events) == "The staging port is 6543."
    assert interop.answer([]) == ""
    assert not interop.finished(events)  # no step finished with `stop`: the reply was cut short
    stop = {"type": "step_finish", "part": {"messageID": "m2", "reason": "stop"}}
    assert interop.finished([*events, stop])
    assert not interop.finished([*events, {**stop, "part": {"reason": "tool-calls"}}])


def test_a_client_s_answers_are_judged_as_foldline_s() -> None:
    """The same `score_facts` economics uses: the value in the answer's text is what counts."""
    port, *others = planted_facts(7, output_facts=True)
    report = SimulationReport(profile="feature", seed=7, turns_planned=10)
    report.answers = [(port.question, f"It is {port.value}, as you said.")]
    report.answers += [(f.question, "I do not remember.") for f in others]
    score_facts(report, output_facts=True)
    assert (report.facts_asked, report.facts_retained) == (len(others) + 1, 1)
    assert (report.output_facts_asked, report.output_facts_retained) == (3, 0)


def test_the_page_names_the_real_clients_rows() -> None:
    report = load_benchmark("report")
    row = econ.report_row("feature", "opencode", "opencode, real", SimulationReport("feature", 7, 3))
    page = report.build_page([row], [], "feature 3", [])
    assert "| feature | opencode | 1 |" in page
    assert "Real clients: `opencode` (opencode 1.18.33" in page
    assert "Real clients" not in report.build_page([{**row, "strategy": "truncate"}], [], "feature 3", [])


def _args(*argv: str) -> Any:
    return peers.argument_parser().parse_args(list(argv))


def test_claude_code_s_window_setting_reaches_its_environment_over_the_defaults(tmp_path: Path) -> None:
    client = interop.ClaudeCode(
        Path("/bin/true"), tmp_path, "http://127.0.0.1:1", extra_env={peers.AUTO_COMPACT_WINDOW: "100000"}
    )
    env = client.env()
    assert env[peers.AUTO_COMPACT_WINDOW] == "100000"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1"  # the defaults are still there
    assert peers.AUTO_COMPACT_WINDOW not in interop.ClaudeCode(Path("/bin/true"), tmp_path, "u").env()
    # a setting wins over a default of the same name (the caller asked for it)
    moved = interop.ClaudeCode(Path("/bin/true"), tmp_path, "u", extra_env={"HOME": "/elsewhere"})
    assert moved.env()["HOME"] == "/elsewhere"


def test_opencode_s_compaction_setting_is_written_to_its_config(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    interop.OpenCode(Path("/bin/true"), tmp_path, "http://h", compaction={"prune": True}).prepare()
    config = json.loads((tmp_path / "ws" / "opencode.json").read_text())
    assert config["compaction"] == {"prune": True}
    assert config["provider"]["anthropic"]["options"]["baseURL"] == "http://h/v1"
    assert "compaction" not in interop.opencode_config("http://h")  # its defaults: no section at all


def test_each_client_setting_is_its_own_row_named_after_the_setting() -> None:
    runs = peers.settings(_args("--client", "claude-code", "--auto-compact-window", "100000,60000"))
    assert [r.name for r in runs] == ["claude-code@100k", "claude-code@60k"]
    assert runs[1].env == {peers.AUTO_COMPACT_WINDOW: "60000"}
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW=60000" in runs[1].label
    both = peers.settings(
        _args("--client", "claude-code", "--auto-compact-window", "100000", "--defaults-too")
    )
    assert [r.name for r in both] == ["claude-code", "claude-code@100k"]
    pct = peers.settings(
        _args("--client", "claude-code", "--auto-compact-window", "100000", "--autocompact-pct", "50,30")
    )
    assert [r.name for r in pct] == ["claude-code@100k-50pct", "claude-code@100k-30pct"]
    assert pct[0].env == {peers.AUTO_COMPACT_WINDOW: "100000", peers.AUTOCOMPACT_PCT: "50"}
    assert [r.name for r in peers.settings(_args("--client", "opencode"))] == ["opencode"]
    swept = peers.settings(_args("--client", "opencode", "--opencode-compaction", "prune=true,tail_turns=2"))
    assert [(r.name, r.compaction) for r in swept] == [
        ("opencode@prune=true,tail_turns=2", {"prune": True, "tail_turns": 2})
    ]
    names = ("claude-code@100k", "opencode", "truncate", "opencode@prune=true")
    assert [peers.client_of(n) for n in names] == [
        "claude-code",
        "opencode",
        None,
        "opencode",
    ]
    for bad in ("prune=yes", "threshold=100", "reserved=-1", "prune"):
        with pytest.raises(ValueError, match="--opencode-compaction"):
            peers.parse_compaction(bad)


def test_a_client_at_a_setting_is_a_peer_of_its_own_on_the_page() -> None:
    report = load_benchmark("report")
    rows = [
        {**econ.report_row("feature", name, name, SimulationReport("feature", 7, 3)), "seed": seed}
        for name in ("claude-code", "claude-code@100k")
        for seed in (7, 8)
    ]
    page = report.build_page(rows, [], "feature 3", [])
    assert "| feature | claude-code@100k | 2 |" in page
    assert "`claude-code` played feature (seeds 7, 8)." in page


@pytest.mark.slow
@pytest.mark.parametrize("client", ["claude-code", "opencode"])
def test_three_turns_of_a_real_client_make_an_economics_row(client: str) -> None:
    command = [sys.executable, str(BENCHMARKS / "peers.py"), "--client", client, "--profile", "feature"]
    command += ["--turns", "3", "--seeds", "7", "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
    if done.returncode == peers.UNAVAILABLE:
        pytest.skip(f"{client} cannot be installed here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    print(f"\n{client} 3 turns: {json.dumps({k: v for k, v in row.items() if k != 'context_per_turn'})}")
    expected = econ.report_row(
        "feature", client, "", SimulationReport(profile="feature", seed=7, turns_planned=3)
    )
    # and what the fleet's runner adds (the full unit is left out of printed rows)
    assert set(row) == {*expected, "client", *(k for k in RUN_KEYS if k != "unit")}
    assert (row["profile"], row["strategy"], row["seed"], row["client"]) == ("feature", client, 7, client)
    assert row["cost_usd"] > 0
    assert 0 < row["cache_read_share"] < 1
    assert row["api_calls"] >= 3
    assert row["http_400"] == 0
    assert (row["turns_completed"], row["turns_planned"], row["errors"]) == (3, 3, [])
    (cell,) = econ.aggregate([row])  # the report's table takes it
    assert cell["strategy"] == client


class _OpenCodeServer:
    """How opencode's server answered one turn (the client process is the edge here)."""

    def __init__(self, reply: interop.OpenCodeReply) -> None:
        self.reply = reply

    def turn(self, prompt: str) -> interop.OpenCodeReply:
        return self.reply


_REFUSED = {"name": "APIError", "data": {"statusCode": 400}}


@pytest.mark.parametrize(
    ("finish", "error", "outcome"),
    [
        ("stop", None, "answered"),
        # left its loop at the window without a word: the user types the next prompt
        ("model_context_window_exceeded", None, "no answer"),
        (None, None, "no answer"),
        # answered, though a request of the turn was refused: noted, and the session goes on
        ("stop", _REFUSED, "noted"),
        ("tool-calls", _REFUSED, "failed"),
        (None, _REFUSED, "failed"),
    ],
)
def test_an_opencode_turn_goes_on_unless_it_failed_without_an_answer(
    finish: str | None, error: dict[str, object] | None, outcome: str
) -> None:
    driver = object.__new__(peers.Driver)
    driver.name = "opencode"
    reply = interop.OpenCodeReply(text="Done." if finish == "stop" else "", finish=finish, error=error)
    driver.opencode = _OpenCodeServer(reply)  # type: ignore[assignment]
    if outcome == "failed":
        with pytest.raises(peers.ClientRunError, match="did not finish"):
            driver.turn("Explain the parser.")
        return
    text, note = driver.turn("Explain the parser.")
    assert text == reply.text
    if outcome == "answered":
        assert note is None
    elif outcome == "no answer":
        assert note is not None
        assert "without an answer" in note
    else:
        assert note is not None
        assert "APIError" in note

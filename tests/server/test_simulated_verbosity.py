"""`SimulatedConfig.verbosity_scale`: the reply-length knob the benchmarks sweep.

A session of the simulated model is played at several scales; the lines its replies quote from tool
results follow the scale, and scale 1.0 gives the calibrated replies byte for byte.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from foldline._json import dumps, loads
from foldline.config import Config, TranscriptConfig
from foldline.server.backend import BackendRequest
from foldline.server.config import SimulatedConfig
from foldline.server.simulated import SimulatedBackend
from foldline.simulation import simulate
from foldline.testing import SimulatedProvider

_NOTED = re.compile(r"What I see so far:\n((?:- .*\n)+)")
"""The lines a reply notes from the previous round's results before its next calls."""


async def _replies(
    tmp_path: Path,
    config: SimulatedConfig | None,
    profile: str = "swe",
    requests: list[BackendRequest] | None = None,
) -> list[str]:
    """Every reply's content (JSON) over a 10-turn session of `profile`, seed 3 (and its requests,
    into `requests` when given)."""
    provider = SimulatedProvider(seed=3, profile=profile)
    if config is not None:
        provider.backend = SimulatedBackend(seed=3, profile=profile, config=config)
    replies: list[str] = []
    answer = provider.backend.reply

    def recorded(request: BackendRequest) -> object:
        if requests is not None:
            requests.append(request)
        reply = answer(request)
        replies.append(dumps(reply.content).decode())
        return reply

    provider.backend.reply = recorded  # type: ignore[method-assign]
    transcript = TranscriptConfig(sessions_dir=tmp_path / "sessions", fsync="never")
    report = await simulate(
        provider,
        profile=profile,
        turns=10,
        seed=3,
        workspace=tmp_path / "ws",
        sessions_dir=tmp_path / "sessions",
        config=Config(transcript=transcript, context_window=10**9),
        levels=False,
    )
    assert report.errors == []
    return replies


def _most_noted(replies: list[str]) -> int:
    """The most result lines one reply noted between rounds."""
    texts = [b["text"] for r in replies for b in loads(r) if b.get("type") == "text"]
    return max((len(m.group(1).splitlines()) for t in texts for m in _NOTED.finditer(t)), default=0)


@pytest.mark.anyio
async def test_the_scale_multiplies_the_lines_replies_quote(tmp_path: Path) -> None:
    calibrated = await _replies(tmp_path / "1", None)
    short = await _replies(tmp_path / "0.25", SimulatedConfig(verbosity_scale=0.25))
    long = await _replies(tmp_path / "2", SimulatedConfig(verbosity_scale=2.0))
    # swe notes at most 8 lines between rounds: 2 at a quarter, 16 at twice (its results have more)
    assert _most_noted(calibrated) == 8
    assert _most_noted(short) == 2
    assert _most_noted(long) == 16
    assert sum(map(len, short)) < sum(map(len, calibrated)) < sum(map(len, long))


@pytest.mark.anyio
async def test_scale_1_leaves_every_reply_as_calibrated(tmp_path: Path) -> None:
    # The same requests, not a second session: the workspace's test runs print their timings, so
    # two sessions differ in their tool results whatever the model does.
    for profile in ("swe", "feature"):
        requests: list[BackendRequest] = []
        calibrated = await _replies(tmp_path / profile, None, profile, requests)
        scaled = SimulatedBackend(seed=3, profile=profile, config=SimulatedConfig(verbosity_scale=1.0))
        assert [dumps(scaled.reply(r).content).decode() for r in requests] == calibrated
        shorter = SimulatedBackend(seed=3, profile=profile, config=SimulatedConfig(verbosity_scale=0.5))
        assert [dumps(shorter.reply(r).content).decode() for r in requests] != calibrated


def test_a_scale_keeps_a_line_while_above_zero_and_refuses_a_negative() -> None:
    assert SimulatedConfig(verbosity_scale=0.01).reply_lines("swe") == (1, 1)
    assert SimulatedConfig(verbosity_scale=0).reply_lines("swe") == (0, 0)
    assert SimulatedConfig(verbosity_scale=0.5).reply_lines("feature") == (25, 100)  # the default's
    assert SimulatedConfig().reply_lines("swe") == (8, 20)
    with pytest.raises(ValueError, match="verbosity_scale must be 0 or more"):
        SimulatedConfig(verbosity_scale=-1)
    with pytest.raises(ValueError, match="verbosity_scale"):
        SimulatedConfig(verbosity_scale=float("nan"))


def test_foldline_serve_takes_the_scale_for_the_simulated_model_only() -> None:
    from click.testing import CliRunner

    from foldline.cli import cli
    from foldline.cli.serve import _simulated

    backend = _simulated(None, None, 4, "swe", 0.5)
    assert isinstance(backend, SimulatedBackend)
    assert (backend.seed, backend.profile, backend.config.verbosity_scale) == (4, "swe", 0.5)
    result = CliRunner().invoke(cli, ["serve", "--backend", "scripted", "--verbosity-scale", "2"])
    assert result.exit_code != 0
    assert "--verbosity-scale is a setting of --backend simulated" in result.output
    result = CliRunner().invoke(cli, ["serve", "--backend", "simulated", "--verbosity-scale", "-1"])
    assert result.exit_code != 0
    assert "--verbosity-scale" in result.output

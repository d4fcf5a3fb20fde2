"""The `[id:…]` tags go only to a model that can use them: a Snip tool offered, on a window Snip is for.

Small models echo the tags (a whole answer of SmolLM2-135M was one), so a request built with no
Snip tool, or for a window below `Config.snip_min_window`, carries none (docs/real-model.md).
"""

from __future__ import annotations

from typing import Any

from foldline.api.params import build_request
from foldline.config import Config
from foldline.providers.base import Capabilities
from foldline.session import offered_tools
from foldline.timeline import UserEntry, UserMessage
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

ALL = tool_specs(default_tools())
NO_SNIP = [spec for spec in ALL if spec["name"] != "Snip"]


def _user_text(tools: list[dict[str, Any]], config: Config) -> str:
    entry = UserEntry(
        uuid="u1", timestamp="2026-01-01T00:00:00.000Z", message=UserMessage(content="Read notes.txt")
    )
    plan = build_request([entry], config, "system", tools, Capabilities(name="test"))
    messages: list[dict[str, Any]] = plan.body["messages"]  # type: ignore[assignment]
    return "\n".join(
        str(block.get("text", "")) for m in messages if m["role"] == "user" for block in m["content"]
    )


def test_a_request_built_with_no_snip_tool_has_no_id_tags() -> None:
    assert "[id:" in _user_text(ALL, Config())  # the tags are there when Snip is offered...
    text = _user_text(NO_SNIP, Config())  # ...and not without it
    assert "Read notes.txt" in text
    assert "[id:" not in text


def test_a_request_for_a_small_window_has_no_id_tags() -> None:
    small = Config(context_window=8_192)
    assert small.window < small.snip_min_window
    assert "[id:" not in _user_text(ALL, small)
    assert "[id:" in _user_text(ALL, Config(context_window=small.snip_min_window))


def test_a_session_on_a_small_window_offers_no_snip_tool() -> None:
    config, tools = offered_tools(Config(context_window=8_192), default_tools())
    assert not config.snip_enabled
    assert "Snip" not in [t.name for t in tools]
    config, tools = offered_tools(Config(), default_tools())
    assert config.snip_enabled
    assert "Snip" in [t.name for t in tools]

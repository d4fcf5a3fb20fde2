"""The child of the Collapse kill -9 test: a session that commits a fold, then dies mid-request.

`python _collapse_child.py TRANSCRIPT SENT` runs turns on an in-process model until the first request
that carries a committed fold; it writes that request's body to SENT and SIGKILLs itself before the
reply, leaving the transcript as a crash would.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.compact._collapse_model import WORDS, CollapseModel, collapse_config, prompt

from foldline._json import dumps
from foldline.compact.collapse import Collapse
from foldline.engine import QueryEngine
from foldline.testing import FunctionProvider
from foldline.tools import default_tools
from foldline.transcript import open_session


def _keep(sent: Path, body: dict[str, Any]) -> None:
    sent.write_bytes(dumps(body))


async def main(transcript: Path, sent: Path) -> None:
    model = CollapseModel()

    async def answer(body: dict[str, Any], betas: tuple[str, ...]) -> Any:
        if (
            "<collapsed-context" in dumps(body["messages"]).decode()
            and "Summarize only" not in dumps(body["messages"][-1]).decode()
        ):
            _keep(sent, body)
            os.kill(os.getpid(), signal.SIGKILL)
        return await model.answer(body, betas)

    writer, timeline = open_session(transcript, session_id="s1", fsync="boundaries")
    engine = QueryEngine(
        provider=FunctionProvider(answer),
        config=collapse_config(),
        tools=default_tools(),
        workspace=transcript.parent,
        timeline=timeline,
        transcript=writer,
        permission_mode="bypassPermissions",
    )
    collapse = Collapse.for_engine(engine)
    engine.stages = [collapse]
    engine.tail_hooks = [collapse.tail_hook]
    engine.stop_hooks = [collapse.stop]
    for n in range(1, 30):
        await engine.submit_message(prompt(n, WORDS))
        await engine.drain()
        await collapse.wait()
    sys.exit("no commit was ever sent")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))

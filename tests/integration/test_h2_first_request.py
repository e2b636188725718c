"""The first request on an HTTP/2 connection goes out without httpcore's 99 turns of the
event loop (net/http2.py): the request stage holds the request's own work, as curl's does.

Checked by hand (sys.setprofile between the tls_done and request_sent marks, refserver
over TLS): httpcore's own handle_async_request turned the loop 102 times in that span,
99 of them awaiting its stream semaphore down from 100 to 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.timeline import Timeline
from promptpath.tracer.orchestrator import trace
from tests.helpers.refserver import RefServer

pytestmark = pytest.mark.integration


async def test_the_request_stage_turns_the_event_loop_a_few_times_not_a_hundred(
    refserver_tls: RefServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns: list[int] = [0]
    counting = [False]
    real_mark = Timeline.mark

    def mark(self: Timeline, name: str, *args: Any, **kwargs: Any) -> None:
        if name == "tls_done":
            counting[0] = True
        elif name == "request_sent":
            counting[0] = False
        real_mark(self, name, *args, **kwargs)

    monkeypatch.setattr(Timeline, "mark", mark)
    loop = asyncio.get_running_loop()
    run_once: Callable[[], None] = loop._run_once  # type: ignore[attr-defined]

    def counted() -> None:
        if counting[0]:
            turns[0] += 1
        run_once()

    monkeypatch.setattr(loop, "_run_once", counted, raising=False)
    url = f"https://localhost:{refserver_tls.port}/v1/chat/completions"
    headers = ["x-promptpath-ttft-ms: 0", "x-promptpath-tokens: 3"]
    options = build_options(
        RunArgs(url, cacert=refserver_tls.ca, http="2", ipv4=True, headers=headers, warm=True)
    )
    result = await trace(options)
    assert result.exc is None and result.timeline.http_version == "HTTP/2"
    assert "request_sent" in result.timeline.milestones
    assert 0 < turns[0] < 20, turns[0]
    # The server's SETTINGS then open the stream slots as httpcore's own state would: the
    # warm request goes on the same connection.
    assert result.warm is not None and result.warm.exc is None
    assert result.warm.timeline.tls is result.timeline.tls

"""A scripted transport: the orchestrator driven over no socket at all.

In the spirit of httpcore's ``_backends/mock.py``: ``trace(options,
transport_factory=scripted(script))`` runs the real tracer (stages, deadline, ingest,
error mapping) against a ``Script`` that says which stages the connection goes
through, where it fails or hangs, what the response head is, and which body pieces
arrive, when, and how the body ends. Stamps are taken as a real transport takes them
(``perf_counter_ns`` at the moment each piece is handed over, each piece one "read"),
so milestones and gaps come out as a loopback run's would, without a server.

The real-socket and lab tests stay what they are: this one is for the logic above the
socket (phase_of, transport_error, consume) at every stage a failure can reach.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import anyio

from promptpath.core.timeline import CloseKind, StageName, Timeline
from promptpath.net.transport import (
    BodyPiece,
    ConnectSpec,
    Recorder,
    ResponseHead,
    TransportError,
    WireRequest,
)
from promptpath.options import RunOptions

#: Where a script can hang forever (so --timeout cuts it) or fail: a connect stage, or
#: the request (before the request is written), wait (before the head) and the body.
Point = Literal["connect", "tls", "request", "wait"]


@dataclass(frozen=True, slots=True)
class Piece:
    """Body bytes handed over ``after_s`` after the previous piece (one read each)."""

    data: bytes
    after_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Fail:
    """The body dies here: the peer closed (``close``) and the read raises."""

    reason: str = "connection reset by peer"
    close: CloseKind | None = "rst"
    protocol: bool = False
    after_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Hang:
    """The body goes silent here and stays silent."""


BodyStep = Piece | Fail | Hang


@dataclass(frozen=True, slots=True, kw_only=True)
class Script:
    """One connection's behaviour, as the transport will play it."""

    stages: tuple[StageName, ...] = ("connect",)  # ("connect", "tls") for https
    fail_at: Point | None = None  # raise ``error`` there (a connect stage stays open)
    error: Exception = field(default_factory=lambda: OSError("connection refused"))
    hang_at: Point | None = None  # wait forever there
    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("content-type", "text/event-stream"),)
    http_version: str = "HTTP/1.1"
    body: tuple[BodyStep, ...] = ()
    end: bool = True  # after the steps: a clean end (else the body just stops: EOF)
    close: CloseKind | None = None  # how the peer closed after the body, if it did
    reusable: bool = True
    multiplexed: bool = False


def sse(*events: str) -> tuple[Piece, ...]:
    """One piece per SSE ``data:`` event (``[DONE]`` written as given)."""
    return tuple(Piece(f"data: {e}\n\n".encode()) for e in events)


def chat_chunk(text: str) -> str:
    """An OpenAI chat.completion.chunk carrying ``text``."""
    return (
        '{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":'
        f'"{text}"'
        "}}]}"
    )


class ScriptedTransport:
    """Plays ``scripts`` in turn, one per connection opened (the last one repeats)."""

    def __init__(self, *scripts: Script) -> None:
        assert scripts, "a scripted transport needs a script"
        self.scripts = scripts
        self.connects = 0
        self.sent: list[WireRequest] = []  # every request, as the tracer handed it over
        self.specs: list[ConnectSpec] = []  # every connect's spec, in order
        self.sent_on: list[int] = []  # for each of ``sent``: the connect it went on (index)
        self.aborted = 0
        self.closed = 0

    @staticmethod
    def recorder(timeline: Timeline) -> Recorder:
        return Recorder(timeline)

    async def connect(self, spec: ConnectSpec, recorder: Recorder) -> ScriptedConnection:
        script = self.scripts[min(self.connects, len(self.scripts) - 1)]
        self.specs.append(spec)
        self.connects += 1
        recorder.connects += 1
        timeline = recorder.timeline
        for name in script.stages:
            stage = timeline.begin(name, time.perf_counter_ns())
            if name == "connect" and spec.addresses:
                ip, family = spec.addresses[0]
                timeline.address, timeline.family = (ip, spec.dial_port), family
            await _point(script, name)
            stage.end_ns = time.perf_counter_ns()
            timeline.mark("connected" if name == "connect" else "tls_done", stage.end_ns)
        return ScriptedConnection(self, script, recorder, index=self.connects - 1)


class ScriptedConnection:
    """One scripted connection; each request plays the script's response."""

    def __init__(
        self, transport: ScriptedTransport, script: Script, recorder: Recorder, *, index: int = 0
    ) -> None:
        self._transport = transport
        self._script = script
        self._recorder = recorder
        self._index = index
        self._open = True

    @property
    def reusable(self) -> bool:
        return self._open and self._script.reusable

    @property
    def multiplexed(self) -> bool:
        return self._script.multiplexed

    async def request(
        self, request: WireRequest, timeline: Timeline | None = None
    ) -> tuple[ResponseHead, _Body]:
        script, recorder = self._script, self._recorder
        tl = recorder.timeline if timeline is None else timeline
        self._transport.sent.append(request)
        self._transport.sent_on.append(self._index)
        await _point(script, "request")
        now = time.perf_counter_ns()
        recorder.wrote(now, len(request.body))
        tl.mark("request_sent", now)
        await _point(script, "wait")
        t_head = time.perf_counter_ns()
        recorder.read(t_head, 1)
        tl.mark("ttfb", t_head)
        head = ResponseHead(
            status=script.status,
            headers=script.headers,
            http_version=script.http_version,
            t_ns=t_head,
        )
        return head, _Body(script, recorder)

    async def abort(self) -> None:
        self._transport.aborted += 1
        self._open = False

    async def aclose(self) -> None:
        self._transport.closed += 1
        self._open = False


class _Body:
    def __init__(self, script: Script, recorder: Recorder) -> None:
        self._steps = iter(script.body)
        self._script = script
        self._recorder = recorder
        self._done = False

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> BodyPiece:
        if self._done:
            raise StopAsyncIteration
        step = next(self._steps, None)
        if step is None:
            self._done = True
            t_ns = time.perf_counter_ns()
            if self._script.close is not None:
                self._recorder.closed(self._script.close, t_ns)
            if not self._script.end:
                raise StopAsyncIteration
            return BodyPiece(data=b"", t_ns=t_ns, read_index=self._recorder.read_index, end=True)
        if isinstance(step, Hang):
            await anyio.sleep_forever()
        await anyio.sleep(step.after_s)
        t_ns = time.perf_counter_ns()
        if isinstance(step, Fail):
            self._done = True
            if step.close is not None:
                self._recorder.closed(step.close, t_ns)
            raise TransportError(step.reason, protocol=step.protocol)
        index = self._recorder.read(t_ns, len(step.data))
        return BodyPiece(data=step.data, t_ns=t_ns, read_index=index)

    async def aclose(self) -> None:
        self._done = True


async def _point(script: Script, point: Point | StageName) -> None:
    if script.hang_at == point:
        await anyio.sleep_forever()
    if script.fail_at == point:
        raise script.error


class Scripted:
    """A transport factory for ``trace(..., transport_factory=...)``: each session it
    builds a ScriptedTransport over ``scripts``; ``transport`` is the last one built."""

    def __init__(self, *scripts: Script) -> None:
        self.scripts = scripts
        self.built: list[ScriptedTransport] = []

    def __call__(self, options: RunOptions) -> ScriptedTransport:
        self.built.append(ScriptedTransport(*self.scripts))
        return self.built[-1]

    @property
    def transport(self) -> ScriptedTransport:
        return self.built[-1]


__all__ = [
    "Fail",
    "Hang",
    "Piece",
    "Script",
    "Scripted",
    "ScriptedConnection",
    "ScriptedTransport",
    "chat_chunk",
    "sse",
]

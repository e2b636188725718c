"""The reference endpoint's WebSocket side: every dialect whose plug-in speaks WebSocket
(the Responses API's WebSocket mode, Realtime text sessions), over hypercorn's ASGI
websocket scope (HTTP/1.1 upgrade).

The upgrade is judged first: the key (401), the controls in the upgrade's
``x-promptpath-*`` headers (a ``status`` control refuses the upgrade with that status
and the dialect's error body, as a gateway in front of the real API would). Once
accepted, each ``response.create`` is answered by the same paced writer the HTTP
streams use (server/streaming.py), each event one text message stamped with its send
time; the message's own ``promptpath`` object adds controls (the upgrade's headers win,
as they do over HTTP). ``truncate-after`` ends the stream with a Close frame whose code
is ``close-code`` (1011 unless set). The socket stays open between responses, as the
real API's does; what a session says besides its responses (Realtime's opening, its
acknowledged turns, its errors' shape) is the emulation's (``Dialect.session_*``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections import deque
from collections.abc import MutableMapping
from dataclasses import replace
from typing import Any, Protocol

from promptpath.server.behaviour import (
    Behaviour,
    BehaviourError,
    applied,
    from_request,
    response_info,
)
from promptpath.server.dialect import (
    Dialect,
    Finish,
    JSONObject,
    RequestError,
    json_body,
)
from promptpath.server.routing import ws_dialect_for_path
from promptpath.server.stats import ServerStats
from promptpath.server.streaming import (
    Exchange,
    Message,
    Receive,
    Send,
    StreamSpec,
    write_stream,
)
from promptpath.server.tokens import answer_tokens

Scope = MutableMapping[str, Any]


class Host(Protocol):
    """What a WebSocket needs of the app that serves it (server/app.py's ReferenceApp)."""

    defaults: Behaviour

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool: ...


#: Longest client message read (a response.create with a long prompt fits).
MAX_MESSAGE = 8 * 1024 * 1024


class WSExchange(Exchange):
    """One WebSocket's receive/send for the paced writer: what the client sends while a
    response streams is queued for after it, and a disconnect is noticed at once."""

    def __init__(self, receive: Receive, send: Send) -> None:
        super().__init__(receive, send)
        self.queued: deque[Message] = deque()

    async def _wait_disconnect(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "websocket.disconnect":
                self.gone_unix_ns = self.gone_unix_ns or time.time_ns()
                self.queued.append(message)
                return
            self.queued.append(message)

    async def next_message(self) -> Message:
        if self.queued:
            return self.queued.popleft()
        return await self._receive()


async def serve_websocket(
    app: Host, stats: ServerStats, scope: Scope, receive: Receive, send: Send
) -> None:
    """Answer one WebSocket from the upgrade to its close."""
    path: str = scope["path"]
    dialect_cls = ws_dialect_for_path(path)
    headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
    first = await receive()
    if first["type"] != "websocket.connect":
        return
    if dialect_cls is None:
        body = {"error": {"message": f"no WebSocket endpoint at {path}", "type": "not_found"}}
        await _refuse(send, 404, body)
        return
    if not app.authorized(headers):
        await _refuse(send, 401, dialect_cls.error_reply(401).body)
        return
    try:
        upgrade_behaviour, _ = from_request(app.defaults, headers, None)
    except BehaviourError as exc:
        await _refuse(send, 400, dialect_cls.error_reply(400, str(exc), param=exc.header).body)
        return
    if upgrade_behaviour.status is not None and upgrade_behaviour.status != 200:
        reply = dialect_cls.error_reply(upgrade_behaviour.status)
        await _refuse(send, upgrade_behaviour.status, reply.body, reply.headers)
        return
    await send({"type": "websocket.accept", "headers": [(b"x-request-id", _id("req").encode())]})
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    session = _Session(app, stats, dialect_cls, path, query, headers, WSExchange(receive, send))
    await session.run()


async def _refuse(
    send: Send, status: int, body: JSONObject, headers: tuple[tuple[str, str], ...] = ()
) -> None:
    """The upgrade answered with ``status`` and a JSON body (ASGI's websocket.http.response)."""
    data = json_body(body)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers]
    with contextlib.suppress(Exception):  # the client may be gone already
        await send({"type": "websocket.http.response.start", "status": status, "headers": raw})
        await send({"type": "websocket.http.response.body", "body": data})


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


class _Session:
    """One accepted WebSocket: its client messages in order, one response at a time."""

    def __init__(
        self,
        app: Host,
        stats: ServerStats,
        dialect_cls: type[Dialect],
        path: str,
        query: str,
        headers: list[tuple[bytes, bytes]],
        ex: WSExchange,
    ) -> None:
        self.app = app
        self.stats = stats
        self.dialect_cls = dialect_cls
        self.path = path
        self.headers = headers
        self.ex = ex
        self.prompt_tokens = 0  # a conversation's (Realtime's): the user's turns so far
        self.model = _query_model(query) or "promptpath-reference"

    async def send(self, data: JSONObject) -> bool:
        data = {**data, "promptpath": {"seq": 0, "sent_unix_ns": time.time_ns()}}
        return await self.ex.send({"type": "websocket.send", "text": json.dumps(data)})

    async def run(self) -> None:
        for opening in self.dialect_cls.session_opening(self.model, _id):
            await self.send(opening)
        while True:
            message = await self.ex.next_message()
            if message["type"] != "websocket.receive":
                return  # websocket.disconnect
            text = message.get("text")
            if text is None:
                text = bytes(message.get("bytes") or b"").decode("utf-8", "replace")
            if len(text) > MAX_MESSAGE:
                await self.error("message too large", "invalid_request_error")
                continue
            try:
                payload = json.loads(text)
            except (ValueError, RecursionError):
                await self.error("the message is not JSON", "invalid_request_error")
                continue
            if not isinstance(payload, dict):
                await self.error("the message is not a JSON object", "invalid_request_error")
                continue
            kind = payload.get("type")
            if kind == "response.create":
                if not await self.respond(payload):
                    return
                continue
            turn = self.dialect_cls.session_turn(kind, payload, _id)
            if turn is None:
                await self.error(f"unknown event type {kind!r}", "invalid_request_error")
                continue
            tokens, replies = turn
            self.prompt_tokens += tokens
            for reply in replies:
                await self.send(reply)

    async def error(self, message: str, kind: str, param: str | None = None) -> None:
        error = {"type": kind, "code": None, "message": message, "param": param}
        await self.send(self.dialect_cls.session_error(error, _id))

    async def respond(self, payload: JSONObject) -> bool:
        """One response.create answered in full; False when the socket is gone or closed."""
        app, ex = self.app, self.ex
        loop = asyncio.get_running_loop()
        t_recv = loop.time()
        started_unix_ns = time.time_ns()
        record = self.stats.start(
            path=self.path, dialect=self.dialect_cls.name, started_unix_ns=started_unix_ns
        )
        body = dict(payload)
        body.pop("type", None)
        try:
            params = self.dialect_cls.parse_request(body)
            behaviour, sources = from_request(app.defaults, self.headers, payload)
        except RequestError as exc:
            record.status = 400
            await self.error(exc.message, "invalid_request_error", exc.param)
            return True
        except BehaviourError as exc:
            record.status = 400
            await self.error(str(exc), "invalid_request_error", exc.header)
            return True
        if self.dialect_cls.conversation:
            params = replace(params, model=self.model, prompt_tokens=self.prompt_tokens)
        if behaviour.probe_id is not None:
            self.stats.tag(record, behaviour.probe_id)
        behaviour = _streaming(behaviour)
        info = response_info(params, behaviour)
        limit = params.max_tokens
        n_tokens = behaviour.tokens if limit is None else min(behaviour.tokens, limit)
        finish: Finish = "length" if limit is not None and limit < behaviour.tokens else "stop"
        record.status = 200
        ex.watch()
        t_recv_unix_ns = time.time_ns() - int((loop.time() - t_recv) * 1e9)
        try:
            spec = StreamSpec(
                dialect=self.dialect_cls(info),
                behaviour=behaviour,
                tokens=answer_tokens(n_tokens),
                finish=finish,
                t_recv=t_recv,
                report={"request_id": _id("req"), **applied(behaviour, sources)},
                ws=True,
            )
            complete = await write_stream(ex, spec, stats=self.stats, record=record)
            if not complete and ex.gone:
                self.stats.disconnect(record, ex.gone_unix_ns)
            self.stats.ended(record, complete=complete, t_recv_unix_ns=t_recv_unix_ns)
        finally:
            ex.close()
        cut = behaviour.truncate_after is not None and behaviour.truncate_after <= n_tokens
        return complete or not (ex.gone or cut)


def _streaming(behaviour: Behaviour) -> Behaviour:
    """A WebSocket always streams: the HTML and JSON body controls do not apply."""
    return replace(behaviour, body=None) if behaviour.body is not None else behaviour


def _query_model(query: str) -> str | None:
    from urllib.parse import parse_qs

    values = parse_qs(query).get("model")
    return values[0] if values else None


__all__ = ["WSExchange", "serve_websocket"]

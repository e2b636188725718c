"""The ASGI application: routing, authentication, controls, whole-body answers.

Streams are written by ``promptpath.server.streaming``; dialect shapes come from the
dialect modules. ``/stats`` and ``/healthz`` are not counted as requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import sys
import time
from collections.abc import Callable, MutableMapping
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import Any

from promptpath.server.behaviour import (
    Behaviour,
    BehaviourError,
    applied,
    from_request,
    response_info,
)
from promptpath.server.body import parse_body
from promptpath.server.cdnplay import cdn_headers
from promptpath.server.dialect import (
    Dialect,
    ErrorReply,
    Finish,
    JSONObject,
    RequestError,
    json_body,
    stamped,
)
from promptpath.server.prefill import PrefixCache, cache_tokens, prefill_ms
from promptpath.server.routing import dialect_for_path, path_model, websocket_only
from promptpath.server.runtime import PATH as RUNTIME_PATH
from promptpath.server.runtime import changed
from promptpath.server.sigv4_check import AwsTestKey, SigV4Refusal, check_sigv4
from promptpath.server.stats import RequestRecord, ServerStats
from promptpath.server.streaming import (
    Exchange,
    Plan,
    Receive,
    Send,
    StreamSpec,
    write_stream,
)
from promptpath.server.tokens import answer_tokens

Scope = MutableMapping[str, Any]

#: ``GET /stats/requests/<probe-id>``: the admin side of the ghost-stream probe.
TAGGED_PREFIX = "/stats/requests/"

HTML_PAGE = b"""<!DOCTYPE html>
<html><head><title>Network Access Required</title></head>
<body><h1>Please sign in to continue</h1>
<p>Your connection is being intercepted by a captive portal or a web filter.
This is not the API you asked for.</p></body></html>
"""


class ReferenceApp:
    """ASGI app serving the four dialects, ``/stats`` and ``/healthz``."""

    def __init__(
        self,
        defaults: Behaviour | None = None,
        *,
        api_key: str | None = None,
        aws_credentials: AwsTestKey | None = None,
        on_startup: Callable[[], None] | None = None,
    ) -> None:
        self.defaults = defaults or Behaviour()
        self.prefix_cache = PrefixCache()  # --prefix-cache: this server's, for its life
        self.api_key = api_key
        self.aws_credentials = aws_credentials
        self.on_startup = on_startup
        self.stats = ServerStats()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            try:
                await self._http(scope, receive, send)
            except Exception as exc:  # every request is untrusted: see _internal_error
                await self._internal_error(scope, send, exc)
        elif scope["type"] == "websocket":
            from promptpath.server.websocket import serve_websocket

            try:
                await serve_websocket(self, self.stats, scope, receive, send)
            except Exception as exc:  # untrusted too: one line, and hypercorn closes 1011
                self._log_internal(scope, exc)

    async def _internal_error(self, scope: Scope, send: Send, exc: Exception) -> None:
        """A request this app did not foresee: one escaped line on stderr and a 500 (when
        nothing was sent yet), never a traceback, and serve goes on serving."""
        self._log_internal(scope, exc)
        body = b'{"error":{"message":"internal error","type":"server_error"}}'
        await self._reply(send, 500, body, "application/json")

    @staticmethod
    def _log_internal(scope: Scope, exc: Exception) -> None:
        where = ascii(str(scope.get("path", "")))[:200]
        print(
            f"promptpath serve: internal error answering {where}: {type(exc).__name__}:"
            f" {ascii(str(exc))[:300]}",
            file=sys.stderr,
            flush=True,
        )

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.on_startup is not None:
                    self.on_startup()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- plumbing --------------------------------------------------------------------
    @staticmethod
    async def _reply(
        send: Send,
        status: int,
        body: bytes,
        content_type: str,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        if status in (204, 304):  # these must not carry a body (RFC 9110 15.3.5, 15.4.5)
            body = b""
            raw = []
        else:
            raw = [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
            ]
        raw += [(k.encode(), v.encode()) for k, v in headers]
        with contextlib.suppress(Exception):  # the client may be gone already
            await send({"type": "http.response.start", "status": status, "headers": raw})
            await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _json(
        self, send: Send, status: int, data: JSONObject, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        body = json_body(stamped(data, seq=0, sent_unix_ns=time.time_ns()))
        await self._reply(send, status, body, "application/json", headers)

    async def _error(
        self,
        send: Send,
        record: RequestRecord,
        dialect: type[Dialect],
        status: int,
        message: str | None = None,
        *,
        param: str | None = None,
        request_id: str = "",
        extra: tuple[tuple[str, str], ...] = (),
    ) -> None:
        reply: ErrorReply = dialect.error_reply(status, message, param=param)
        record.status = status
        headers = (*reply.headers, ("x-request-id", request_id)) if request_id else reply.headers
        headers = (*headers, *extra)
        await self._json(send, status, reply.body, headers)

    async def _tagged(self, send: Send, probe_id: str) -> None:
        """What happened to the request a probe tagged with ``probe_id``."""
        record = self.stats.tagged(probe_id)
        if record is None:
            reply = {"error": {"message": f"no request tagged {probe_id!r}", "type": "not_found"}}
            await self._json(send, 404, reply)
            return
        body = json_body(asdict(record))
        await self._reply(send, 200, body, "application/json", (("cache-control", "no-store"),))

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """Whether the request carries the key (always, when serve requires none)."""
        return self._authorized(headers)

    def _authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        if self.api_key is None:
            return True
        expected = self.api_key.encode()
        for name, value in headers:
            key = name.lower()
            if key == b"authorization" and value[:7].lower() == b"bearer ":
                candidate = value[7:].strip()
            elif key in (b"x-api-key", b"x-goog-api-key", b"api-key"):
                candidate = value.strip()
            else:
                continue
            if hmac.compare_digest(candidate, expected):
                return True
        return False

    def _sigv4_refusal(
        self, scope: Scope, headers: list[tuple[bytes, bytes]], body: bytes, service: str
    ) -> SigV4Refusal | None:
        """Why a Bedrock request's signature for ``service`` is refused (None: it is good),
        or None when it carries a bearer token matching --api-key-env (a Bedrock API key)."""
        assert self.aws_credentials is not None
        texts = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]
        if self.api_key is not None and self._authorized(headers):
            return None
        raw_path = bytes(scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        return check_sigv4(
            method=str(scope["method"]),
            raw_path=raw_path.split("?", 1)[0],
            query=bytes(scope.get("query_string", b"")).decode("latin-1"),
            headers=texts,
            body=body,
            credentials=self.aws_credentials,
            service=service,
            now=datetime.now(UTC),
        )

    # -- requests --------------------------------------------------------------------
    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        started_unix_ns = time.time_ns()
        path: str = scope["path"]
        method: str = scope["method"]

        # Every answer, early errors included, waits for the whole request body. Observed
        # with hypercorn 0.18: an answer sent while the body was still arriving made
        # hypercorn close the stream, and the body that followed crashed the connection's
        # task ("Unhandled exception in client_connected_cb"): on HTTP/2 a KeyError on the
        # stream id when the DATA arrived (h2.py looks the removed stream up unguarded, as
        # h3.py does too; HTTP/3 early answers failed before this as well), on HTTP/1.1
        # an SSLError for application data after the server's close_notify.
        ex = Exchange(receive, send)
        raw = await ex.read_body()
        # Delays count from the whole request received, as a model server's queue would:
        # the client's request_sent is the comparable stamp on its side.
        t_recv = loop.time()

        if path.rstrip("/") == RUNTIME_PATH:
            who = list(scope.get("headers", []))
            status, reply, self.defaults = changed(self.defaults, scope, method, raw, who, self)
            await self._json(send, status, reply)
            return
        if path.rstrip("/") == "/healthz":
            await self._reply(send, 200, b"ok", "text/plain; charset=utf-8")
            return
        if path.rstrip("/") == "/stats":
            body = json_body(self.stats.snapshot())
            await self._reply(send, 200, body, "application/json", (("cache-control", "no-store"),))
            return
        if path.rstrip("/") == "/metrics":
            body = self.stats.metrics().encode()
            await self._reply(send, 200, body, "text/plain; version=0.0.4; charset=utf-8")
            return
        if path.startswith(TAGGED_PREFIX):
            await self._tagged(send, path[len(TAGGED_PREFIX) :].rstrip("/"))
            return

        dialect_cls = dialect_for_path(path)
        record = self.stats.start(
            path=path,
            dialect=None if dialect_cls is None else dialect_cls.name,
            started_unix_ns=started_unix_ns,
        )
        if dialect_cls is None and websocket_only(path):
            # A plain request where only an upgrade is served (a hop that dropped the
            # Upgrade and Connection headers forwards one): 426 names what was missing.
            record.status = 426
            reply = {
                "error": {
                    "message": f"{path} answers only a WebSocket upgrade",
                    "type": "upgrade_required",
                }
            }
            await self._json(
                send, 426, reply, (("upgrade", "websocket"), ("connection", "upgrade"))
            )
            return
        if dialect_cls is None:
            record.status = 404
            reply = {"error": {"message": f"no endpoint at {path}", "type": "not_found"}}
            await self._json(send, 404, reply)
            return
        if method != "POST":
            # A server-wide --cdn plays on this answer too: a HEAD (probe edges'
            # --edges-request) reads the edge's headers from whatever status it gets.
            edge = cdn_headers(self.defaults.cdn)
            message = f"{method} not allowed; use POST"
            await self._error(send, record, dialect_cls, 405, message, extra=edge)
            return

        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        request_id = f"req_{secrets.token_hex(12)}"
        if raw is None:
            await self._error(send, record, dialect_cls, 413, "request body too large")
            return
        if self.aws_credentials is not None and dialect_cls.sigv4_service is not None:
            refusal = self._sigv4_refusal(scope, headers, raw, dialect_cls.sigv4_service)
            if refusal is not None:
                record.status = refusal.status
                said: JSONObject = {"message": refusal.message}
                await self._json(
                    send, refusal.status, said, (("x-amzn-errortype", refusal.error_type),)
                )
                return
        elif not self._authorized(headers):
            await self._error(send, record, dialect_cls, 401, request_id=request_id)
            return
        try:
            payload = parse_body(raw)
            params = dialect_cls.parse_request(payload)
            if dialect_cls.model_in_path:
                params = replace(params, model=path_model(path) or params.model)
        except RequestError as exc:
            await self._error(send, record, dialect_cls, 400, exc.message, param=exc.param)
            return
        # Controls may ride in the body too (gateways that strip x- headers); a header wins.
        try:
            behaviour, sources = from_request(self.defaults, headers, payload)
        except BehaviourError as exc:
            await self._error(send, record, dialect_cls, 400, str(exc), param=exc.header)
            return
        if behaviour.reasoning and not dialect_cls.reasons:
            message = f"the {dialect_cls.name} emulation sends no reasoning"
            await self._error(send, record, dialect_cls, 400, message, param="reasoning")
            return
        if behaviour.probe_id is not None:
            self.stats.tag(record, behaviour.probe_id)
        lowered = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
        guardrail = dialect_cls.guardrail(payload, lowered)

        if behaviour.status is not None and behaviour.status != 200:
            await self._error(
                send,
                record,
                dialect_cls,
                behaviour.status,
                request_id=request_id,
                extra=(*behaviour.response_headers, *cdn_headers(behaviour.cdn)),
            )
            return

        delay_ms = 0.0
        if behaviour.prefix_cache or behaviour.prefill_ms_per_1k:
            cached = 0
            if behaviour.prefix_cache:
                cached, written = cache_tokens(
                    self.prefix_cache, dialect_cls, payload, params.prompt_tokens
                )
                params = replace(params, cached_tokens=cached, cache_write_tokens=written)
            delay_ms = prefill_ms(behaviour.prefill_ms_per_1k, params.prompt_tokens, cached)
        info = response_info(params, behaviour)
        dialect = dialect_cls(info)
        limit = params.max_tokens
        n_tokens = behaviour.tokens if limit is None else min(behaviour.tokens, limit)
        finish: Finish = "length" if limit is not None and limit < behaviour.tokens else "stop"
        tokens = answer_tokens(n_tokens)
        common: tuple[tuple[str, str], ...] = (
            ("x-request-id", request_id),
            ("cache-control", "no-cache"),
        )
        if behaviour.accel_buffering is not None:
            common = (*common, ("x-accel-buffering", behaviour.accel_buffering))
        common = (*common, *behaviour.response_headers, *cdn_headers(behaviour.cdn))

        record.status = 200
        if behaviour.body == "html":
            await self._reply(send, 200, HTML_PAGE, "text/html; charset=utf-8", common)
            return
        if behaviour.body == "json" or not params.stream:
            ex.watch()
            try:
                plan = Plan(behaviour, t_recv, prefill_ms=delay_ms)
                if not await ex.sleep_until(plan.deadline(max(0, n_tokens - 1))):
                    self.stats.disconnect(record)
                    return
                elapsed = int((loop.time() - t_recv) * 1e9)
                answer = dialect.complete("".join(tokens), finish, n_tokens, elapsed)
                self.stats.tokens(record, n_tokens)
                await self._json(send, 200, answer, common)
            finally:
                ex.close()
            return

        ex.watch()
        t_recv_unix_ns = time.time_ns() - int((loop.time() - t_recv) * 1e9)
        try:
            spec = StreamSpec(
                dialect=dialect,
                behaviour=behaviour,
                tokens=tokens,
                finish=finish,
                t_recv=t_recv,
                http_version=str(scope.get("http_version", "1.1")),
                headers=common,
                report={"request_id": request_id, **applied(behaviour, sources)},
                # A synchronous guardrail holds the answer and releases each scanned batch
                # (the controls as asked stay as they were: this is the provider's doing).
                hold_batch=dialect_cls.guardrail_batch if guardrail == "sync" else 1,
                prefill_ms=delay_ms,
            )
            complete = await write_stream(ex, spec, stats=self.stats, record=record)
            if not complete and ex.gone:
                self.stats.disconnect(record, ex.gone_unix_ns)
            self.stats.ended(record, complete=complete, t_recv_unix_ns=t_recv_unix_ns)
        finally:
            ex.close()

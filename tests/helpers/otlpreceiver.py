"""A loopback OTLP/HTTP receiver that decodes what it is sent with the official protobufs.

A tiny ``http.server`` in a thread: POST /v1/traces is parsed as an
``ExportTraceServiceRequest``, POST /v1/metrics as an ``ExportMetricsServiceRequest``
(opentelemetry-proto, the definitions collectors are generated from), each kept with its
raw bytes and headers. ``status`` makes it answer with an error instead (a collector that
refuses), and ``location`` adds a Location header to that answer (a redirect); ``stall``
makes it read the request and never answer (a collector that hangs). ``posted`` lists
the path of every POST, those it does not decode too.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

_MESSAGES: dict[str, tuple[type[Any], type[Any]]] = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes  # as it arrived (decompressed when gzip)
    message: Any  # the decoded Export*ServiceRequest


@dataclass
class OtlpReceiver:
    port: int
    received: list[Received] = field(default_factory=list)
    status: int = 200
    location: str | None = None
    stall: threading.Event | None = None
    posted: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def of(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]

    def clear(self) -> None:
        with self.lock:
            self.received.clear()
            self.posted.clear()


def value_of(any_value: AnyValue) -> object:
    """An OTLP AnyValue as Python (str, bool, int, float)."""
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def attributes(pairs: Any) -> dict[str, object]:
    """A repeated KeyValue as a dict."""
    return {kv.key: value_of(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver: OtlpReceiver | None = None

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return None

        def do_POST(self) -> None:
            assert receiver is not None
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with receiver.lock:
                receiver.posted.append(self.path)
            if receiver.stall is not None:
                receiver.stall.wait(30)
                return
            kinds = _MESSAGES.get(self.path)
            if kinds is None:
                self.send_error(404)
                return
            request_type, response_type = kinds
            message = request_type()
            message.ParseFromString(body)
            with receiver.lock:
                receiver.received.append(
                    Received(self.path, dict(self.headers.items()), body, message)
                )
            answer = response_type().SerializeToString()
            self.send_response(receiver.status)
            if receiver.location is not None:
                self.send_header("Location", receiver.location)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = OtlpReceiver(port=server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        if receiver.stall is not None:
            receiver.stall.set()
        server.shutdown()
        server.server_close()

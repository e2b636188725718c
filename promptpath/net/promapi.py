"""Prometheus' HTTP API, one instant query at a time, for `promptpath vantage`.

``POST {base}/api/v1/query`` with ``query``, ``time`` and ``timeout`` as a form (what
Prometheus, Thanos Query and Mimir all take; a form keeps a long PromQL out of URLs and
access logs). The URL is the user's: its path is the base (``/prometheus`` behind a
proxy, Mimir's ``/prometheus``), its userinfo becomes Basic authentication and is never
shown. No proxy is used, whatever the environment says: the Prometheus asked is the one
named.

Every answer is untrusted: at most ``MAX_ANSWER_BYTES`` read, within the deadline the
caller gives (each read, and the whole query); the JSON is handed back as Prometheus'
``data.result``, which core/vantage/table.py checks further. Failures are this package's
errors, each naming Prometheus and the stage: its name that does not resolve (``dns``, exit
3), a connection refused or unreachable (``connect``, 4), its certificate (``tls``, 5), an
error answer, the query refused (``response``, 6: Prometheus' own ``errorType`` and
``error`` quoted), an answer that is not the API's (``response``, 7), the deadline
(``timeout``, 8).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from promptpath.core.errors import (
    ConnectError,
    DNSError,
    HTTPStatusError,
    StreamError,
    TLSError,
    TraceTimeout,
    UsageError,
    http_status_kind,
)

MAX_ANSWER_BYTES = 16 * 1024 * 1024
#: How much of Prometheus' own error text is quoted.
MAX_QUOTED = 300
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """Where Prometheus' API is: scheme, host, port, base path, credentials (never shown)."""

    scheme: str
    host: str
    port: int
    base: str
    authorization: str | None = None
    cacert: str | None = None

    @property
    def where(self) -> str:
        """How messages name it: scheme, host and port, no credentials, no path."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def endpoint(url: str, *, cacert: str | None = None) -> Endpoint:
    """``--prometheus URL`` checked: http(s), a host, a port if given that is a number."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            "--prometheus wants http(s)://HOST[:PORT][/PATH], e.g. http://127.0.0.1:9090",
            kind="bad_option",
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UsageError("--prometheus: the port is not a number", kind="bad_option") from None
    if parts.query or parts.fragment:
        raise UsageError(
            "--prometheus: give the base URL (no ?query, no #fragment)", kind="bad_option"
        )
    auth = None
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    return Endpoint(
        scheme=parts.scheme,
        host=parts.hostname,
        port=port,
        base=parts.path.rstrip("/"),
        authorization=auth,
        cacert=cacert,
    )


def _connection(where: Endpoint, timeout: float) -> http.client.HTTPConnection:
    if where.scheme == "https":
        context = ssl.create_default_context(cafile=where.cacert)
        return http.client.HTTPSConnection(where.host, where.port, timeout=timeout, context=context)
    return http.client.HTTPConnection(where.host, where.port, timeout=timeout)


def _left(deadline: float, where: Endpoint) -> float:
    """Seconds left for the answer, or the timeout error once none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TraceTimeout(
            f"Prometheus at {where.where} did not answer the query in time",
            stage="response",
            kind="timeout",
        )
    return left


def _connect(conn: http.client.HTTPConnection, where: Endpoint) -> None:
    """The connection (and TLS), failures named by stage."""
    name = f"Prometheus at {where.where}"
    try:
        conn.connect()
    except socket.gaierror as exc:
        raise DNSError(
            f"{name}: its name does not resolve ({exc.strerror or exc})",
            stage="dns",
            kind="resolve_failed",
        ) from exc
    except ssl.SSLCertVerificationError as exc:
        raise TLSError(
            f"{name}: its certificate was refused ({exc.verify_message or exc.reason});"
            " --cacert FILE names the CA that signed it",
            stage="tls",
            kind="cert_verify_failed",
        ) from exc
    except ssl.SSLError as exc:
        raise TLSError(
            f"{name}: the TLS handshake failed ({exc.reason or exc})",
            stage="tls",
            kind="handshake_failed",
        ) from exc
    except TimeoutError as exc:
        raise TraceTimeout(
            f"{name} cannot be reached: no answer to the connection within the deadline",
            stage="connect",
            kind="timeout",
        ) from exc
    except ConnectionRefusedError as exc:
        raise ConnectError(
            f"{name} cannot be reached: connection refused (is Prometheus listening there?)",
            stage="connect",
            kind="refused",
        ) from exc
    except OSError as exc:
        raise ConnectError(
            f"{name} cannot be reached: {exc.strerror or exc}",
            stage="connect",
            kind="connect_failed",
        ) from exc


def _read(response: http.client.HTTPResponse, where: Endpoint, deadline: float) -> bytes:
    length = response.getheader("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_ANSWER_BYTES:
        raise _too_big(where)
    chunks: list[bytes] = []
    size = 0
    while True:
        _left(deadline, where)
        chunk = response.read1(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise _too_big(where)
        chunks.append(chunk)


def _too_big(where: Endpoint) -> StreamError:
    return StreamError(
        f"Prometheus at {where.where}: the answer is over {MAX_ANSWER_BYTES // 2**20} MiB"
        " (narrow it: --target, --module, a shorter --since, or recording rules)",
        stage="response",
        kind="protocol_error",
    )


def _quoted(value: object) -> str:
    text = str(value)
    # Escaped by the caller's terminal writer; shortened here so a page of HTML is not.
    return text[:MAX_QUOTED] + ("…" if len(text) > MAX_QUOTED else "")


def query(
    where: Endpoint, promql: str, *, at: float, timeout_s: float, user_agent: str
) -> list[Any]:
    """The ``data.result`` of an instant query of ``promql`` at Unix time ``at``."""
    deadline = time.monotonic() + timeout_s
    body = urllib.parse.urlencode(
        {"query": promql, "time": f"{at:.3f}", "timeout": f"{max(1, int(timeout_s * 1000))}ms"}
    ).encode()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
        "User-Agent": user_agent,
    }
    if where.authorization is not None:
        headers["Authorization"] = where.authorization
    conn = _connection(where, timeout_s)
    try:
        _connect(conn, where)
        try:
            conn.sock.settimeout(_left(deadline, where))
            conn.request("POST", f"{where.base}/api/v1/query", body=body, headers=headers)
            response = conn.getresponse()
            raw = _read(response, where, deadline)
        except TimeoutError as exc:
            raise TraceTimeout(
                f"Prometheus at {where.where} did not answer the query within {timeout_s:g} s",
                stage="response",
                kind="timeout",
            ) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise StreamError(
                f"Prometheus at {where.where}: the answer broke off ({exc})",
                stage="response",
                kind="network_error",
            ) from exc
    finally:
        conn.close()
    return _result(raw, response.status, where)


def _result(raw: bytes, status: int, where: Endpoint) -> list[Any]:
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    name = f"Prometheus at {where.where}"
    if isinstance(doc, dict) and doc.get("status") == "error":
        raise HTTPStatusError(
            f"{name} refused the query (HTTP {status}, {_quoted(doc.get('errorType'))}):"
            f" {_quoted(doc.get('error'))}",
            stage="response",
            kind=http_status_kind(status if status >= 400 else 422),
        )
    if status >= 400:
        raise HTTPStatusError(
            f"{name} answered HTTP {status}: not the Prometheus API (is the URL its base?)",
            stage="response",
            kind=http_status_kind(status),
        )
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or doc.get("status") != "success":
        raise StreamError(
            f"{name}: the answer is not the Prometheus API's JSON (is the URL its base?)",
            stage="response",
            kind="malformed",
        )
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise StreamError(
            f"{name}: the answer is not an instant vector ({_quoted(data.get('resultType'))})",
            stage="response",
            kind="malformed",
        )
    result: list[Any] = data["result"]
    return result


__all__ = ["MAX_ANSWER_BYTES", "Endpoint", "endpoint", "query"]

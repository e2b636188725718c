"""``POST /-/defaults``: change serve's default behaviour while it runs (loopback only).

`promptpath watch` is tested against an endpoint whose first-token delay changes while it
watches: a request header cannot do that (watch sends the same request every time), so the
server's defaults change instead. The body is the request body's control object
(``{"promptpath": {"ttft-ms": 300}}``, behaviour.BODY_FIELD), parsed by the same code;
``null`` switches a control back off. Only a client on a loopback address may change it (a
lab's endpoint must not be steerable from the network), and only with the key when serve
requires one.
"""

from __future__ import annotations

from typing import Any, Protocol

from promptpath.core.addr import is_loopback
from promptpath.server.behaviour import (
    Behaviour,
    BehaviourError,
    applied,
    apply_controls,
    body_controls,
)
from promptpath.server.body import parse_body

PATH = "/-/defaults"


def client_is_loopback(scope: dict[str, Any] | Any) -> bool:
    client = scope.get("client") if hasattr(scope, "get") else None
    if not client:
        return False
    try:
        return is_loopback(str(client[0]))
    except ValueError:
        return False


def changed_defaults(defaults: Behaviour, raw: bytes | None) -> Behaviour:
    """``defaults`` with the body's controls applied; BehaviourError naming what was wrong."""
    if raw is None:
        raise BehaviourError("body", "too large")
    try:
        payload = parse_body(raw)
    except Exception as exc:  # the body is untrusted: any failure is a 400
        raise BehaviourError("body", "must be a JSON object") from exc
    controls = body_controls(payload)
    if not controls:
        raise BehaviourError("body", 'needs {"promptpath": {"CONTROL": VALUE, ...}}')
    return apply_controls(defaults, controls)


class _Keyed(Protocol):
    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool: ...


def changed(
    defaults: Behaviour,
    scope: Any,
    method: str,
    raw: bytes | None,
    headers: list[tuple[bytes, bytes]],
    app: _Keyed,
) -> tuple[int, dict[str, Any], Behaviour]:
    """The answer to ``POST /-/defaults`` (status, JSON body) and the defaults after it."""
    if not client_is_loopback(scope):
        return 403, _error("loopback clients only", "forbidden"), defaults
    if method != "POST":
        return 405, _error(f"{method} not allowed; use POST", "bad_method"), defaults
    if not app.authorized(headers):
        return 401, _error("the key serve requires is missing", "unauthorized"), defaults
    try:
        new = changed_defaults(defaults, raw)
    except BehaviourError as exc:
        return 400, {"error": {"message": exc.message, "param": exc.header}}, defaults
    return 200, applied(new, {}), new


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}


__all__ = ["PATH", "changed", "changed_defaults", "client_is_loopback"]

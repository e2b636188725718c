"""What the reference endpoint does with one request: server flags give defaults,
``x-promptpath-<name>`` request headers override them per request, and so does the
request body's ``"promptpath"`` object (``BODY_FIELD``), for paths that strip headers.

Pure: no clock, no I/O. ``from_headers`` and ``from_request`` either return a new
``Behaviour`` or raise ``BehaviourError`` naming the header (or body field) that was
wrong, which the app turns into a 400.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from promptpath.server.controls import (
    BODY_FIELD,
    HEADER_PREFIX,
    RESPONSE_HEADER,
    SINGLE,
    parse_header_line,
)
from promptpath.server.dialect import RequestInfo, RequestParams

#: control name (flag ``--<name>``, header ``x-promptpath-<name>``) -> its row of the table
CONTROLS = SINGLE

BodyKind = Literal["html", "json"]
ControlSource = Literal["header", "body"]
HeaderPairs = Mapping[str, str] | Iterable[tuple[bytes | str, bytes | str]]


class BehaviourError(ValueError):
    """A control header (or flag) with a value we cannot use."""

    def __init__(self, header: str, message: str) -> None:
        super().__init__(f"{header}: {message}")
        self.header = header
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class Behaviour:
    """How one response is produced. ``None`` means "control off"."""

    ttft_ms: float = 0.0  # first content token this long after the request arrived
    # ... and this much more per 1,000 input tokens not cached (server/prefill.py)
    prefill_ms_per_1k: float = 0.0
    prefix_cache: bool = False  # remember prompts' prefixes; report and skip cached tokens
    tokens: int = 32  # content tokens before the terminal marker (max_tokens may cut it)
    reasoning: int = 0  # of those, the first K are the model's reasoning, not the answer
    rate: float = 50.0  # tokens per second; 0 = as fast as possible
    pause_after: int | None = None  # after this many tokens ...
    pause_s: float = 0.0  # ... wait this long
    keepalive_s: float = 0.0  # SSE comment every N s during any longer wait; 0 = off
    truncate_after: int | None = None  # close without terminal marker after K tokens
    error_after: int | None = None  # dialect's mid-stream error event after K tokens
    # which one, for a dialect with several (Bedrock: throttlingException, ...)
    error_type: str | None = None
    malformed_after: int | None = None  # one non-JSON event after K tokens, then go on
    status: int | None = None  # answer with this HTTP status and an error body
    body: BodyKind | None = None  # answer 200 with HTML or JSON instead of a stream
    batch: int = 1  # events per transport write
    # Emulate a provider's content filter that releases output in checked batches (Azure
    # OpenAI's default mode): tokens held until N are made, then written together with
    # the filter's verdict (where the dialect has one); each stamped when it was made.
    filter_batch: int | None = None
    accel_buffering: Literal["yes", "no"] | None = None  # X-Accel-Buffering response header
    # Extra response headers, on streams and error answers alike: lets a test play a
    # provider's rate-limit, timing or edge headers over real sockets.
    response_headers: tuple[tuple[str, str], ...] = ()
    # Keep generating after the client left, as a gateway that consumes the upstream in
    # its own task would make the model do: plays a ghosting upstream in labs.
    ignore_disconnect: bool = False
    # Play a CDN edge's documented headers (server/cdnplay.py): (cdn, IATA code).
    cdn: tuple[str, str] | None = None
    probe_id: str | None = None  # a probe's tag: GET /stats/requests/<id> answers for it
    # WebSocket: the Close frame's code when truncate-after cuts the stream (None: 1011).
    close_code: int | None = None


def parse_response_header(name: str, raw: str) -> tuple[str, str]:
    """``"Name: value"`` as one response header, or ``BehaviourError`` saying why not."""
    try:
        return parse_header_line(raw)
    except ValueError as exc:
        raise BehaviourError(name, str(exc)) from None


def _pairs(headers: HeaderPairs) -> Iterable[tuple[str, str]]:
    items: Iterable[tuple[bytes | str, bytes | str]] = (
        headers.items() if isinstance(headers, Mapping) else headers
    )
    for name, value in items:
        key = name.decode("latin-1") if isinstance(name, bytes) else name
        val = value.decode("latin-1") if isinstance(value, bytes) else value
        yield key.lower(), val.strip()


def from_headers(defaults: Behaviour, headers: HeaderPairs) -> Behaviour:
    """``defaults`` with every ``x-promptpath-<name>`` header applied.

    An empty value, or ``off``/``none``, switches an optional control off. Unknown
    ``x-promptpath-*`` names are rejected so a typo does not silently do nothing.
    """
    return _apply(defaults, _header_controls(headers))


def from_request(
    defaults: Behaviour, headers: HeaderPairs, body: object
) -> tuple[Behaviour, dict[str, ControlSource]]:
    """``defaults`` with the body's controls applied, then the headers' (a header wins:
    it is the explicit per-request spelling every client already uses); also which
    control came from where."""
    in_body = body_controls(body)
    in_headers = list(_header_controls(headers))
    behaviour = _apply(_apply(defaults, in_body), in_headers)
    sources: dict[str, ControlSource] = {c: "body" for c, _, _ in in_body}
    sources.update({c: "header" for c, _, _ in in_headers})
    return behaviour, sources


def body_controls(body: object) -> list[tuple[str, str, str]]:
    """``(control, name for errors, value)`` from the body's ``BODY_FIELD`` object.

    JSON numbers and strings are read as a header's text would be; null switches a
    control off; a list repeats a control (``response-header`` only)."""
    if not isinstance(body, dict) or BODY_FIELD not in body:
        return []
    given = body[BODY_FIELD]
    if not isinstance(given, dict):
        raise BehaviourError(BODY_FIELD, "must be an object of control: value")
    found: list[tuple[str, str, str]] = []
    for control, value in given.items():
        name = f"{BODY_FIELD}.{control}"
        values = value if isinstance(value, list) and control == RESPONSE_HEADER else [value]
        for item in values:
            if item is None:
                text = "off"
            elif isinstance(item, str):
                text = item.strip()
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                text = str(item)
            else:
                raise BehaviourError(name, "must be a string, a number or null")
            found.append((str(control), name, text))
    return found


def _header_controls(headers: HeaderPairs) -> Iterable[tuple[str, str, str]]:
    for name, value in _pairs(headers):
        if name.startswith(HEADER_PREFIX):
            yield name[len(HEADER_PREFIX) :], name, value


def _apply(defaults: Behaviour, controls: Iterable[tuple[str, str, str]]) -> Behaviour:
    changes: dict[str, object] = {}
    added: list[tuple[str, str]] = []
    for control, name, value in controls:
        if control == RESPONSE_HEADER:
            added.append(parse_response_header(name, value))
            continue
        if control not in CONTROLS:
            known = ", ".join(HEADER_PREFIX + c for c in (*CONTROLS, RESPONSE_HEADER))
            raise BehaviourError(name, f"unknown control (known: {known})")
        row = CONTROLS[control]
        changes[row.field] = _parse_value(name, row.field, row.parse, value)
    if added:
        changes["response_headers"] = (*defaults.response_headers, *added)
    return dataclasses.replace(defaults, **changes) if changes else defaults  # type: ignore[arg-type]


def apply_controls(defaults: Behaviour, controls: Iterable[tuple[str, str, str]]) -> Behaviour:
    """``defaults`` with ``(control, name for errors, value)`` triples applied (runtime.py)."""
    return _apply(defaults, controls)


def applied(behaviour: Behaviour, sources: Mapping[str, ControlSource]) -> dict[str, object]:
    """What the endpoint reports in its first event: the value of every control it
    applied (null: off), and which of them the request set (header or body)."""
    return {
        "controls": {name: getattr(behaviour, row.field) for name, row in CONTROLS.items()},
        "controls_from": dict(sorted(sources.items())),
    }


def parse_control(control: str, value: str) -> object:
    """Parse one control value the way its header would be parsed (for CLI flags)."""
    row = CONTROLS[control]
    return _parse_value(f"--{control}", row.field, row.parse, value)


def _parse_value(name: str, field_name: str, parse: Callable[[str], object], value: str) -> object:
    default = _FIELD_DEFAULTS[field_name]
    if value.lower() in ("", "off", "none"):
        if default is None:
            return None
        raise BehaviourError(name, "needs a value")
    try:
        return parse(value)
    except ValueError as exc:
        detail = str(exc)
        if not detail.startswith("must"):  # int()/float() said something unhelpful
            detail = "is not a valid value"
        raise BehaviourError(name, f"{value!r} {detail}") from None


_FIELD_DEFAULTS: dict[str, object] = {f.name: f.default for f in dataclasses.fields(Behaviour)}


def response_info(params: RequestParams, behaviour: Behaviour) -> RequestInfo:
    """One response's identity (a fresh id, the wall clock) with the controls its dialect
    reads: chosen here, by the app's side, so the dialects stay pure."""
    now = datetime.now(UTC)
    return RequestInfo(
        id=secrets.token_hex(12),
        created_unix=int(now.timestamp()),
        created_iso=now.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z",
        params=params,
        error_type=behaviour.error_type,
        reasoning=behaviour.reasoning,
    )

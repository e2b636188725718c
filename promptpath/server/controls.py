"""The reference endpoint's behaviour controls, declared once.

Each ``Control`` row is one control under every name it goes by: the ``serve`` flag
``--<name>`` (a server-wide default), the request header ``x-promptpath-<name>``, the
request body's ``promptpath.<name>`` field, and its row in the docs' table
(``docs_table``; ``tests/unit/test_serve_controls.py`` holds docs/reference-endpoint.md
to it). ``behaviour.py`` applies them to a request, ``command.py`` makes the flags.

Pure and cheap: the standard library only (the flags' Typer side lives in command.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from promptpath.server.cdnplay import NAMES as CDN_NAMES
from promptpath.server.cdnplay import parse_cdn

HEADER_PREFIX: Final = "x-promptpath-"
#: Top-level request-body field carrying the same controls as the headers:
#: ``{"promptpath": {"pause-s": "8", ...}}``. Gateways that drop unknown x- headers pass
#: it on: the LiteLLM proxy 1.106 forwards unknown top-level fields to an openai-compatible
#: upstream (and drops ``metadata`` and ``user``), observed on loopback.
BODY_FIELD: Final = "promptpath"
KEEPALIVE_MIN_S: Final = 0.01  # shortest keepalive interval (0 switches keepalives off)


@dataclass(frozen=True, slots=True, kw_only=True)
class Control:
    """One control: its name, the ``Behaviour`` field it sets and how its text is read,
    its flag (if ``serve`` has one) and its row in the docs."""

    name: str  # --<name>, x-promptpath-<name>, promptpath.<name>
    field: str  # the Behaviour field it sets
    parse: Callable[[str], object]  # header text -> value; ValueError("must ...") if wrong
    doc: str  # what it does, for the docs' table (Markdown)
    #: The flag's value type (``bool``: a switch that sends ``yes``); None: no flag, the
    #: control rides only in a request.
    flag_type: type | None = None
    metavar: str | None = None
    help: str = ""  # the flag's --help line
    repeatable: bool = False  # each occurrence adds one value (response-header only)

    @property
    def header(self) -> str:
        return HEADER_PREFIX + self.name

    @property
    def body_field(self) -> str:
        return f"{BODY_FIELD}.{self.name}"

    @property
    def flag(self) -> str | None:
        return None if self.flag_type is None else f"--{self.name}"


def _parse_float(*, minimum: float = 0.0) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        value = float(raw)
        if not math.isfinite(value) or value < minimum:
            raise ValueError(f"must be a number >= {minimum:g}")
        return value

    return parse


def _parse_interval(*, floor: float) -> Callable[[str], float]:
    """0 (off) or at least ``floor``: a keepalive every 1e-300 s never advances its own
    deadline, and the writer would flood the connection without ever yielding."""

    def parse(raw: str) -> float:
        value = float(raw)
        if not math.isfinite(value) or (value != 0 and value < floor):
            raise ValueError(f"must be 0 (off) or a number >= {floor:g}")
        return value

    return parse


def _parse_int(*, minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            raise ValueError(f"must be an integer {bound}")
        return value

    return parse


def _parse_choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


def _parse_yes_no(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("yes", "no"):
        raise ValueError("must be yes or no")
    return value == "yes"


def _parse_close_code(raw: str) -> int:
    """A close code a server may send (RFC 6455 §7.4): 1000-1003, 1007-1014, 3000-4999;
    1004-1006 and 1015 are reserved for reports, never sent."""
    value = int(raw)
    if not (1000 <= value <= 1003 or 1007 <= value <= 1014 or 3000 <= value <= 4999):
        raise ValueError(
            "must be a sendable WebSocket close code (1000-1003, 1007-1014, 3000-4999)"
        )
    return value


def _parse_error_type(raw: str) -> str:
    if not 1 <= len(raw) <= 64 or not raw.isascii() or not raw.isalnum():
        raise ValueError("must be 1-64 ASCII letters and digits (an exception's name)")
    return raw


_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _parse_probe_id(raw: str) -> str:
    if not 1 <= len(raw) <= 64 or not set(raw) <= _ID_CHARS:
        raise ValueError("must be 1-64 characters of A-Z a-z 0-9 . _ -")
    return raw


_TOKEN_CHARS = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
#: Headers the server itself must own: a test that set them would break the framing.
_RESERVED = frozenset(
    {
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "host",
    }
)


def parse_header_line(raw: str) -> tuple[str, str]:
    """``"Name: value"`` as one response header (name lower-cased), or ValueError why not."""
    key, sep, value = raw.partition(":")
    key, value = key.strip(), value.strip()
    if not sep or not key or not set(key) <= _TOKEN_CHARS:
        raise ValueError(f"{raw!r} is not 'Name: value'")
    if key.lower() in _RESERVED:
        raise ValueError(f"{key} is set by the server itself")
    if any(c in value for c in "\r\n\0"):
        raise ValueError("a header value cannot hold CR, LF or NUL")
    return key.lower(), value


#: Every control, in --help's and the docs' order. Adding one is a row here plus the
#: code in streaming.py (or a dialect) that reads its Behaviour field.
TABLE: Final[tuple[Control, ...]] = (
    Control(
        name="ttft-ms",
        field="ttft_ms",
        parse=_parse_float(),
        flag_type=float,
        metavar="MS",
        help="First-token delay in ms [0].",
        doc="first content token this long after the request (default 0; meta events go"
        " out at once)",
    ),
    Control(
        name="prefill-ms-per-1k",
        field="prefill_ms_per_1k",
        parse=_parse_float(),
        flag_type=float,
        metavar="MS",
        help="More first-token delay per 1,000 input tokens not cached, as prefill [0].",
        doc="prefill: the first token `ttft-ms` plus MS per 1,000 input tokens later (the"
        " input tokens as the usage reports them; cached ones, with `prefix-cache`, not"
        " counted)",
    ),
    Control(
        name="prefix-cache",
        field="prefix_cache",
        parse=_parse_yes_no,
        flag_type=bool,
        help="Remember prompts' prefixes: report cached input tokens and skip their prefill.",
        doc="remember every prompt's prefix (blocks of 48 words, bounded memory); a later"
        " prompt that starts the same reports the shared tokens as cached in its dialect's"
        " usage (`prompt_tokens_details.cached_tokens`, `cache_read_input_tokens`,"
        " `cachedContentTokenCount`, `cacheReadInputTokens`, `input_tokens_details`) and"
        " skips their `prefill-ms-per-1k`; Anthropic and Bedrock cache only a prefix the"
        " request marks (`cache_control`, `cachePoint`) of at least 1,024 tokens, as their"
        " APIs do; the header and body field take `yes` or `no`",
    ),
    Control(
        name="tokens",
        field="tokens",
        parse=_parse_int(maximum=1_000_000),
        flag_type=int,
        metavar="N",
        help="Tokens per answer [32].",
        doc="number of content tokens (default 32, capped by the request's max_tokens)",
    ),
    Control(
        name="reasoning",
        field="reasoning",
        parse=_parse_int(maximum=1_000_000),
        flag_type=int,
        metavar="N",
        help="Send the first N tokens as the model's reasoning, then the answer [0].",
        doc="the first N of those tokens are the model's reasoning, the rest its answer"
        ' (default 0): `reasoning_content` deltas (OpenAI chat, Azure), `"thought": true`'
        " parts (Gemini, Vertex), `message.thinking` (Ollama), a `thinking` content block"
        " (Cohere), a `thinking` block of `thinking_delta`s closed by a `signature_delta`"
        " before the text block (Anthropic), a `reasoning` output item streamed as"
        " `response.reasoning_summary_text.delta` before the message (Responses); the"
        " Bedrock emulations answer it with a 400. With `--pause-after N --pause-s S` the"
        " answer's first text comes S after the last reasoning token",
    ),
    Control(
        name="rate",
        field="rate",
        parse=_parse_float(),
        flag_type=float,
        metavar="N",
        help="Tokens per second, 0 = flat out [50].",
        doc="tokens per second (default 50; 0 = as fast as possible)",
    ),
    Control(
        name="pause-after",
        field="pause_after",
        parse=_parse_int(),
        flag_type=int,
        metavar="N",
        help="Pause after this many tokens.",
        doc="after token N, pause for `pause-s` seconds",
    ),
    Control(
        name="pause-s",
        field="pause_s",
        parse=_parse_float(),
        flag_type=float,
        metavar="SECONDS",
        help="Length of that pause in s.",
        doc="length of the `pause-after` pause, in seconds (default 0)",
    ),
    Control(
        name="keepalive-s",
        field="keepalive_s",
        parse=_parse_interval(floor=KEEPALIVE_MIN_S),
        flag_type=float,
        metavar="SECONDS",
        help="SSE keepalive comment every SECONDS during longer waits (0 = off, min 0.01).",
        doc="SSE comment every SECONDS during any longer wait (0 = off, else at least 0.01);"
        " google-genai 3.6.1 fails on a comment line (`UnknownApiResponseError`), so in the"
        " Gemini dialect this shows what a hop that injects comments does to that SDK",
    ),
    Control(
        name="truncate-after",
        field="truncate_after",
        parse=_parse_int(),
        flag_type=int,
        metavar="N",
        help="Cut the connection after this many tokens.",
        doc="close the connection after token N, without the terminal marker (over"
        " WebSocket: a Close frame with `close-code`)",
    ),
    Control(
        name="error-after",
        field="error_after",
        parse=_parse_int(),
        flag_type=int,
        metavar="N",
        help="Mid-stream error event after this many tokens.",
        doc="the dialect's mid-stream error event after token N",
    ),
    Control(
        name="error-type",
        field="error_type",
        parse=_parse_error_type,
        doc="which error `error-after` sends, for a dialect with several (Bedrock:"
        " `throttlingException`, `modelStreamErrorException` by default,"
        " `validationException`, `internalServerException`, `serviceUnavailableException`,"
        " `modelTimeoutException`); 1-64 ASCII letters and digits",
    ),
    Control(
        name="malformed-after",
        field="malformed_after",
        parse=_parse_int(),
        flag_type=int,
        metavar="N",
        help="One non-JSON event after this many tokens.",
        doc="one event that is not valid JSON after token N",
    ),
    Control(
        name="status",
        field="status",
        parse=_parse_int(minimum=200, maximum=599),  # 1xx cannot be final
        flag_type=int,
        metavar="CODE",
        help="Answer with this HTTP status and an error body.",
        doc="answer with status CODE and a realistic error body (429 carries `Retry-After`)",
    ),
    Control(
        name="body",
        field="body",
        parse=_parse_choice("html", "json"),
        flag_type=str,
        metavar="html|json",
        help="Answer 200 with HTML or JSON, no stream.",
        doc="answer 200 with an HTML page or a JSON object instead of a stream",
    ),
    Control(
        name="batch",
        field="batch",
        parse=_parse_int(minimum=1, maximum=10_000),
        flag_type=int,
        metavar="N",
        help="Events per transport write [1].",
        doc="write N events per transport write (default 1)",
    ),
    Control(
        name="filter-batch",
        field="filter_batch",
        parse=_parse_int(minimum=1, maximum=10_000),
        flag_type=int,
        metavar="N",
        help="Hold tokens and release them N at a time, as a content filter does (Azure:"
        " with its verdict chunk).",
        doc="play a provider's content filter in its default streaming mode: tokens are made"
        " on schedule but held and written N at a time, the Azure dialect adding its verdict"
        " chunk (`content_filter_results` with `content_filter_offsets`, character offsets)"
        " after each batch; each held event's `sent_unix_ns` is when its token was made, so"
        " the canary sees the filter's hold",
    ),
    Control(
        name="accel-buffering",
        field="accel_buffering",
        parse=_parse_choice("yes", "no"),
        flag_type=str,
        metavar="yes|no",
        help="Send X-Accel-Buffering with this value.",
        doc="send `X-Accel-Buffering` (for nginx)",
    ),
    Control(
        name="ignore-disconnect",
        field="ignore_disconnect",
        parse=_parse_yes_no,
        flag_type=bool,
        help="Keep generating after the client left (play a ghosting upstream).",
        doc="keep generating after the client left (a ghosting upstream, for labs); the"
        " header and body field take `yes` or `no`",
    ),
    Control(
        name="response-header",
        field="response_headers",
        parse=parse_header_line,
        flag_type=str,
        metavar="'NAME: VALUE'",
        help="Add this header to every answer (repeatable), e.g. a provider's rate-limit "
        "or Server-Timing header.",
        doc="add a response header, on streams and error answers alike (repeatable; the"
        " header may repeat too, the body field may be a list): a provider's rate-limit,"
        " `Server-Timing` or edge headers over real sockets",
        repeatable=True,
    ),
    Control(
        name="cdn",
        field="cdn",
        parse=parse_cdn,
        flag_type=str,
        metavar="NAME[:CODE]",
        help="Play a CDN edge's headers on every answer (cloudflare:FRA, fastly:AMS, ...).",
        doc="add the headers the CDN `NAME` documents for its edge at `CODE` (an IATA code,"
        f" `FRA` unless given) to every answer: {', '.join(f'`{n}`' for n in CDN_NAMES)}"
        " (`google` names no location, `unknown` sends edge-like headers no CDN documents)",
    ),
    Control(
        name="probe-id",
        field="probe_id",
        parse=_parse_probe_id,
        doc="tag the request so `GET /stats/requests/ID` answers for it (1-64 of `A-Za-z0-9._-`)",
    ),
    Control(
        name="close-code",
        field="close_code",
        parse=_parse_close_code,
        doc="WebSocket only: the Close frame's code when `truncate-after` cuts the stream"
        " (1011 unless set; sendable codes only: 1000-1003, 1007-1014, 3000-4999)",
    ),
)

#: The controls that take one value, by name (every one but response-header): what a
#: request's report of the controls applied lists.
SINGLE: Final[Mapping[str, Control]] = {c.name: c for c in TABLE if not c.repeatable}
#: The one control that may repeat: each occurrence adds one response header.
RESPONSE_HEADER: Final = "response-header"


def docs_table() -> str:
    """The docs' table of controls (docs/reference-endpoint.md), one row per control."""
    rows = ["| flag | header, body field | effect |", "|---|---|---|"]
    for c in TABLE:
        flag = "header and body only" if c.flag is None else _code(c.flag, c.metavar)
        rows.append(f"| {flag} | `{c.header}`, `{c.body_field}` | {c.doc} |")
    return "\n".join(rows) + "\n"


def _code(flag: str, metavar: str | None) -> str:
    text = flag if metavar is None else f"{flag} {metavar}"
    return "`" + text.replace("|", "\\|") + "`"


__all__ = [
    "BODY_FIELD",
    "HEADER_PREFIX",
    "KEEPALIVE_MIN_S",
    "RESPONSE_HEADER",
    "SINGLE",
    "TABLE",
    "Control",
    "docs_table",
    "parse_header_line",
]

"""The one data model every step appends to: stamped facts, no formatting, no clocks.

All ``*_ns`` values are ``time.perf_counter_ns()`` readings taken by the I/O layer;
reporters turn them into milliseconds from ``t0_ns``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from promptpath.core.errors import ErrorKind, ErrorStage, HTTPStatusKind, PromptpathError
    from promptpath.core.rtt import PathRtt

EventKind = Literal["content", "meta", "end", "error", "comment"]
Family = Literal["ipv4", "ipv6"]
#: How the peer ended a connection, as the socket layer saw it.
#: How the peer ended a connection or a request stream: TCP FIN or RST, TLS close_notify,
#: QUIC CONNECTION_CLOSE, a stream reset (HTTP/3 RESET_STREAM, HTTP/2 RST_STREAM) and
#: HTTP/2 GOAWAY.
CloseKind = Literal["fin", "rst", "tls_close_notify", "quic_close", "stream_reset", "goaway"]
ContentType = Literal["text", "reasoning", "tool"]
#: The stages a timeline records with a start and an end, in the order a trace opens
#: them: a load-mode stream's wait for a connection, the forward proxy's hop, then the
#: connection's own set-up. (request, wait, first_token and stream are spans between
#: milestones, not recorded stages; core/errors.ErrorStage names both.)
StageName = Literal[
    "queue",
    "proxy_dns",
    "proxy_connect",
    "proxy_tls",
    "tunnel",
    "dns",
    "connect",
    "tls",
    "quic_handshake",
    "upgrade",
]
#: The set-up stages: every StageName but ``upgrade``, all open before the request goes
#: out. The WebSocket ``upgrade`` (the GET's first byte written to the 101 read) is the
#: request itself: its time is the request and wait spans, so no waterfall draws it twice.
CONNECT_STAGES: tuple[StageName, ...] = tuple(s for s in get_args(StageName) if s != "upgrade")

#: Milestone names, in the order a healthy trace reaches them.
MILESTONES = (
    "dns_done",
    "connected",
    "tls_done",
    "request_sent",
    "ttfb",
    "first_event",
    "ttft",
    "first_output",
    "last_token",
    "end",
)


@dataclass(slots=True, kw_only=True)
class Stage:
    """One timed step (dns, connect, tls, quic_handshake, ...)."""

    name: StageName
    start_ns: int
    end_ns: int | None = None
    ok: bool = True
    detail: dict[str, object] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class Read:
    """One socket read below TLS: when it returned and how many bytes it carried, and how
    long our thread waited for a CPU since the read or write before it (ns; 0 where the
    system does not say: net/schedwait.py)."""

    t_ns: int
    nbytes: int
    waited_ns: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BodyChunk:
    """Decoded response-body bytes handed to us by the HTTP layer."""

    t_ns: int  # stamp of the socket read that carried these bytes
    nbytes: int
    #: the read's ordinal (-1 when unknown): an index into Timeline.reads while below its
    #: length; one past it names a read counted, not kept (Timeline.read_at)
    read_index: int


@dataclass(frozen=True, slots=True)
class InvalidUTF8:
    """Invalid UTF-8 inside the stream's events: each sequence was replaced by U+FFFD, as
    the SSE spec decodes, and counted here so the report can say the text is damaged."""

    events: int = 0  # events (and comments) that carried at least one
    replacements: int = 0  # invalid sequences in all of them


@dataclass(frozen=True, slots=True)
class NotKept:
    """What the timeline counted but did not keep, so that memory stays bounded whatever a
    server sends (a compression bomb decodes to millions of events): events past the
    ingest's cap, and event text past its budget."""

    events: int = 0  # events decoded and counted, not kept in Timeline.events
    content: int = 0  # of those, content events (they still count as tokens)
    text_chars: int = 0  # characters of event text dropped (kept events included)


#: Socket reads (and body chunks) kept in Timeline.reads (and chunks); past it they are
#: counted with their bytes (Timeline.reads_not_kept), so that a server trickling one
#: byte per packet for a whole --timeout (~20k reads/s on loopback, ~220 bytes each
#: kept) does not grow the tracer without bound. As many as the events kept
#: (tracer/ingest.MAX_KEPT_EVENTS): a stream that brings each event in its own read keeps
#: the read of every event kept, so coalescing is judged whole wherever it can be; past
#: the cap the reads themselves are what floods, and ~22 MB is where they stop.
MAX_KEPT_READS = 100_000


@dataclass(slots=True)
class ReadsNotKept:
    """Socket reads and body chunks past MAX_KEPT_READS: counted, with their bytes, not
    kept. Mutable (unlike NotKept): it is bumped once per read in the read loop. The last
    read's stamp and size are kept, for the final silence and load mode's copies."""

    reads: int = 0
    read_bytes: int = 0
    last_ns: int | None = None  # the last read counted here
    last_nbytes: int = 0
    chunks: int = 0
    chunk_bytes: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts the server reported about itself."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    #: Input tokens the provider's prefix cache held (OpenAI prompt_tokens_details.
    #: cached_tokens, Anthropic cache_read_input_tokens, Gemini cachedContentTokenCount,
    #: Bedrock cacheReadInputTokens), as the dialect's plug-in maps them.
    cached_input_tokens: int | None = None
    #: Whether ``input_tokens`` leaves the cached ones out (Anthropic, Bedrock Converse)
    #: rather than counting them in (OpenAI, Gemini).
    cached_apart: bool = False
    #: Input tokens written to the prompt cache with this request (Anthropic's
    #: cache_creation_input_tokens, counted apart from its input_tokens like its reads).
    cache_write_input_tokens: int | None = None
    #: The counts it sent that no request can have (negative, fractional, past
    #: MAX_TOKEN_COUNT): named here, their values kept out of every figure.
    untrusted: tuple[str, ...] = ()


#: Usage's counts, by field name (the JSON report's ``tokens.usage`` keys).
USAGE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
)

#: More tokens than any one request reads or writes (the largest context windows hold
#: ~10 million): a count past it is the server's error, or an attack on our arithmetic.
MAX_TOKEN_COUNT = 10**9


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerControls:
    """The controls the reference endpoint reported it applied (its first event)."""

    applied: tuple[tuple[str, object], ...]  # control name -> value (None: off)
    sources: tuple[tuple[str, str], ...]  # control name -> "header" | "body", as set
    request_id: str | None = None


#: ``StreamEvent.name`` of the chunks a provider's content filter adds, with no token and
#: no error in them (Azure OpenAI: the first chunk's ``prompt_filter_results``, chunks
#: with only ``content_filter_results``): counted apart, never as tokens.
FILTER_EVENTS = frozenset({"prompt_filter_results", "content_filter_results"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEvent:
    """One decoded stream event (an SSE message or an NDJSON line) in dialect terms."""

    t_ns: int  # stamp of the socket read that completed the event
    kind: EventKind  # content | meta | end (terminal marker) | error | comment
    name: str = ""  # dialect event name: "content_block_delta", "chat.completion.chunk", ...
    content_type: ContentType | None = None  # for kind == "content"
    text: str = ""  # the delta carried (may be empty for tool-call argument starts)
    usage: Usage | None = None
    error: str | None = None  # for kind == "error": the server's message
    server_sent_unix_ns: int | None = None  # reference endpoint's send time (wall clock)
    seq: int | None = None  # reference endpoint's event sequence number
    read_index: int = -1  # ordinal of the read that completed it (see BodyChunk.read_index)
    controls: ServerControls | None = None  # reference endpoint's report (first event)
    #: the server's own time for the whole request, reported inside the stream (Bedrock's
    #: metadata.metrics.latencyMs, invoke's invocationLatency), in ms
    server_ms: float | None = None
    #: The model the server says produced this event (OpenAI/Ollama ``model``, Anthropic
    #: ``message.model``, Responses ``response.model``, Gemini ``modelVersion``), if named.
    model: str | None = None


def content_events(events: Iterable[StreamEvent]) -> list[StreamEvent]:
    """The events that carried content (text, reasoning or a tool-call delta): the tokens."""
    return [e for e in events if e.kind == "content"]


def count_content(events: Iterable[StreamEvent]) -> int:
    """How many events carried content."""
    return sum(1 for e in events if e.kind == "content")


#: The content a user sees as the answer: ``first_output`` is the first of it, where
#: ``ttft`` is the first content of any kind (reasoning and tool-call arguments too).
VISIBLE: frozenset[ContentType] = frozenset({"text"})


def is_visible(event: StreamEvent) -> bool:
    """The event carries answer text a user would see (not reasoning, not a tool call)."""
    return (
        event.kind == "content" and (event.content_type or "text") in VISIBLE and bool(event.text)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CertInfo:
    subject: str
    issuer: str
    sans: tuple[str, ...]
    not_before: str  # ISO 8601, UTC
    not_after: str  # ISO 8601, UTC
    days_left: int
    expired: bool = False  # not_after is in the past (days_left rounds toward zero)

    def as_dict(self) -> dict[str, object]:
        """The certificate as the JSON report and the tls probe's evidence show it."""
        return {
            "subject": self.subject,
            "issuer": self.issuer,
            "sans": list(self.sans),
            "not_before": self.not_before,
            "not_after": self.not_after,
            "days_left": self.days_left,
        }


#: How an interception was recognised: the issuer names an inspection product, or the
#: certificate differs from the one a direct handshake to the same origin was shown.
InterceptionKind = Literal["issuer_names_product", "differs_from_direct"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InterceptionEvidence:
    """One reason to believe a TLS-inspecting hop re-signed the origin's certificate."""

    kind: InterceptionKind
    issuer: str  # issuer of the certificate this connection was shown (RFC 4514)
    #: What the issuer was held against: the product table's pattern (``O contains
    #: 'mitmproxy'``) or the issuer a direct handshake was shown.
    compared_with: str
    source: str | None = None  # where the table's pattern comes from (issuer_names_product)


@dataclass(frozen=True, slots=True, kw_only=True)
class Interception:
    """A TLS-inspecting hop stood between us and the origin."""

    by: str | None  # the product, when the issuer names one
    evidence: tuple[InterceptionEvidence, ...]


@dataclass(slots=True, kw_only=True)
class TLSInfo:
    sni: str | None
    alpn_offered: tuple[str, ...]
    alpn: str | None = None
    version: str | None = None
    cipher: str | None = None
    resumed: bool = False
    verified: bool | None = None  # None: not checked (-k)
    verify_error: str | None = None
    cert: CertInfo | None = None
    #: None: not judged (no certificate seen); False: judged, no sign of interception.
    intercepted: Interception | Literal[False] | None = None
    # Client authentication (mTLS): whether the server sent a CertificateRequest (None:
    # the handshake did not show it), whether we answered with a certificate, and which
    # one (parsed after the trace, as ``cert`` is).
    client_cert_requested: bool | None = None
    client_cert_sent: bool | None = None
    client_cert: CertInfo | None = None
    # The peer's certificate as received; parsed into ``cert`` after the trace, off the
    # clock (parsing it between handshake and request showed as request time).
    cert_der: bytes | None = field(default=None, repr=False)
    # The ssl module's own decoding of a verified certificate (``SSLObject.getpeercert``),
    # called after the trace, as ``cert_der`` is parsed: most certificates need nothing
    # more, and cryptography's import (~40 ms of CPU) is then not paid (net/tlsinfo.py).
    decoded_cert: Callable[[], Mapping[str, Any]] | None = field(
        default=None, repr=False, compare=False
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectAttempt:
    """One TCP connect (or QUIC handshake) attempt to one address."""

    ip: str
    port: int
    family: Literal["ipv4", "ipv6"]
    start_ns: int
    end_ns: int
    error: str | None = None
    local_port: int | None = None  # our side of a TCP connection that was made


@dataclass(frozen=True, slots=True, kw_only=True)
class DNSAnswer:
    """What a resolver said for one name."""

    resolver: str  # "system", "literal", "--resolve", or "ADDR:PORT" of a named resolver
    addresses: tuple[tuple[str, Family], ...]
    start_ns: int
    end_ns: int
    ttl: int | None = None
    cname_chain: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True, kw_only=True)
class DNSFailure:
    """Why the lookup for the connection failed, as far as the resolver said."""

    kind: str  # the DNSError kind: nxdomain, nodata, servfail_or_timeout, ...
    rcode: str | None = None  # None: no reply came back (or getaddrinfo, which does not say)
    status: str | None = None
    negative_ttl: int | None = None  # SOA minimum of a negative answer


@dataclass(slots=True, kw_only=True)
class QuicStats:
    """Datagrams and bytes one QUIC connection moved (HTTP/3 runs only)."""

    version: str | None = None  # "QUICv1", "QUICv2" or the wire version in hex
    datagrams_in: int = 0
    datagrams_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass(slots=True, kw_only=True)
class ProxyInfo:
    """The forward proxy a run went through: where, and what it answered to CONNECT."""

    url: str  # scheme://host:port, never with credentials
    source: str  # "--proxy", "profile", or the environment variable that named it
    address: tuple[str, int] | None = None  # the proxy's address we connected to
    dns: DNSAnswer | None = None  # the lookup of the proxy's name
    tls: TLSInfo | None = None  # the TLS session with an https:// proxy
    tunnel: bool = False  # CONNECT (https:// target) or absolute-form requests (http://)
    status: int | None = None  # the proxy's answer to CONNECT
    reason: str | None = None  # its reason phrase ("Connection established")
    headers: list[tuple[str, str]] = field(default_factory=list)  # Via, Proxy-Agent, ...
    authenticated: bool = False  # a Proxy-Authorization header was sent (never its value)


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseRecord:
    """How and when the peer ended the connection (or the request stream), at the socket."""

    kind: CloseKind
    t_ns: int
    code: int | None = None  # QUIC application/transport error code, RESET_STREAM code


@dataclass(frozen=True, slots=True, kw_only=True)
class GoawayRecord:
    """An HTTP/2 GOAWAY the server sent while this request's stream was open: with code 0
    (NO_ERROR) a graceful shutdown, the stream going on when its id is at or below
    ``last_stream_id`` (RFC 9113 section 6.8)."""

    t_ns: int  # the read that carried it
    code: int  # its error code (0: NO_ERROR)
    last_stream_id: int  # the last stream the server processes
    stream_id: int  # this request's stream (0: not known)


@dataclass(slots=True, kw_only=True)
class ErrorInfo:
    """The error that ended a trace, as data (what reporters and the JSON show)."""

    stage: ErrorStage
    kind: ErrorKind | HTTPStatusKind
    message: str
    detail: dict[str, object] = field(default_factory=dict)
    #: The exception itself (its class is the exit code, its cause the evidence); not data.
    exc: PromptpathError | None = field(default=None, repr=False, compare=False)
    #: When the error ended the trace (a timeout: the deadline), on the timeline's clock:
    #: the stage still open at that moment runs to it, so the time lost shows as a stage.
    t_ns: int | None = None

    @classmethod
    def from_error(cls, exc: PromptpathError, t_ns: int | None = None) -> ErrorInfo:
        # Its own detail dict: an edit to the record must not reach back into the exception.
        return cls(
            stage=exc.stage,
            kind=exc.kind,
            message=exc.message,
            detail=dict(exc.detail),
            exc=exc,
            t_ns=t_ns,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SentRequest:
    """The request as it went on the wire, recorded by the tracer once so that reporters
    and exports show it without preparing it again. Credential values are redacted here
    (the name stays: that a key was sent is part of the story)."""

    method: str
    path: str  # path plus query, as sent, key-like query values redacted (as in the URL)
    headers: tuple[tuple[str, str], ...]  # in the order sent, credential values redacted
    body_bytes: int  # the encoded body's length
    key_sent: bool  # a key went with it (from the environment or from -H)
    client: str  # the client shape copied (--as)
    not_offered: tuple[str, ...] = ()  # encodings that client offers that we left out
    http_preference: str = "auto"  # the HTTP version that client speaks unless told

    def header(self, name: str) -> str | None:
        """The (redacted) value sent for ``name``, or None without one."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class WSPing:
    """One in-band WebSocket ping: when it was written and when its pong arrived."""

    sent_ns: int
    pong_ns: int | None = None  # None: no pong before the stream ended

    @property
    def rtt_ns(self) -> int | None:
        return None if self.pong_ns is None else self.pong_ns - self.sent_ns


#: Who ended a WebSocket: the server's Close frame, ours, our parser refusing a frame
#: (``protocol``), or the TCP connection ending without any Close frame (``eof``).
WSCloseBy = Literal["server", "client", "protocol", "eof"]


@dataclass(slots=True, kw_only=True)
class WebSocketInfo:
    """What a WebSocket run learned beyond HTTP: the upgrade's outcome, the messages, the
    close and the pings (the 101's headers are ``Timeline.response_headers``)."""

    subprotocols_offered: tuple[str, ...] = ()
    subprotocol: str | None = None  # the one the server chose
    extensions_offered: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()  # as the server accepted them (permessage-deflate...)
    upgrade_start_ns: int | None = None  # the upgrade GET's first byte handed to the socket
    upgraded_ns: int | None = None  # the read that completed the 101
    messages_sent: int = 0  # our messages (response.create, ...)
    sent_ns: int | None = None  # the last of our opening messages written
    messages: int = 0  # whole messages received
    fragmented: int = 0  # of those, messages in more than one frame
    binary: int = 0  # of those, binary messages (no dialect sends any: counted, not decoded)
    control_frames: int = 0  # pings and pongs received
    close_code: int | None = None  # 1006: the TCP connection ended without a Close frame
    close_reason: str | None = None
    close_by: WSCloseBy | None = None
    close_ns: int | None = None
    pings: list[WSPing] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class Timeline:
    """Everything one traced request learned, in stamped facts."""

    t0_ns: int
    t0_unix_ns: int  # wall clock at t0: maps server send times onto our clock
    stages: list[Stage] = field(default_factory=list)
    milestones: dict[str, int] = field(default_factory=dict)
    reads: list[Read] = field(default_factory=list)
    #: How long the tracer's thread waited for a CPU between its reads (the sum of
    #: ``Read.waited_ns``, past the kept reads too); None where the system does not say.
    cpu_wait_ns: int | None = None
    bytes_written: int = 0
    chunks: list[BodyChunk] = field(default_factory=list)
    events: list[StreamEvent] = field(default_factory=list)
    attempts: list[ConnectAttempt] = field(default_factory=list)
    address: tuple[str, int] | None = None
    family: Literal["ipv4", "ipv6"] | None = None
    tls: TLSInfo | None = None
    http_version: str | None = None
    status: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    reused_connection: bool = False
    stream_end: Literal["marker", "truncated", "error"] | None = None
    closed_ns: int | None = None  # when the response body ended at the transport
    error: ErrorInfo | None = None
    dns: DNSAnswer | None = None  # the lookup for the connection (also when it failed)
    dns_error: DNSFailure | None = None
    quic: QuicStats | None = None
    #: Client CPU building the ClientHello (TCP: from before the TLS library starts to the
    #: ClientHello's send; QUIC: the connection and its first Initial): outside the tls
    #: and quic_handshake stages, so both protocols' setup spans cover the same wire span.
    client_hello_ns: int | None = None
    #: HTTP/3: client CPU on the server's handshake flight, inside quic_handshake: each
    #: datagram that arrived before the handshake completed, from its arrival to the end
    #: of processing it and sending what it triggered (the Finished included), summed. The
    #: last one's holds the certificate check and queueing the first request, which leaves
    #: in the Finished's datagram (net/quic_complete.py).
    server_flight_ns: int | None = None
    close: CloseRecord | None = None  # set once, by the transport, when the peer closed
    goaway: GoawayRecord | None = None  # HTTP/2: the server announced its close (GOAWAY)
    close_after_end: str | None = None  # the connection outlived the terminal marker: how
    compressed: str | None = None  # Content-Encoding of the event stream, when not identity
    proxy: ProxyInfo | None = None  # set when the run went through a forward proxy
    invalid_utf8: InvalidUTF8 = InvalidUTF8()  # replaced sequences inside events
    not_kept: NotKept = NotKept()  # events and text counted but not kept (memory bound)
    #: reads and chunks past MAX_KEPT_READS, counted but not kept (memory bound)
    reads_not_kept: ReadsNotKept = field(default_factory=ReadsNotKept)
    decoded_bytes: int = 0  # body bytes after content decoding (== wire bytes when identity)
    #: A read's bytes were still being decoded when the trace ended: an error then (a
    #: timeout) cut the client's decoding, not a silence of the server's.
    decoding: bool = False
    request: SentRequest | None = None  # what the tracer sent (or was about to send)
    websocket: WebSocketInfo | None = None  # set by the WebSocket transport
    #: The connection's round-trip estimates, set by the transport when the stream ended
    #: (TCP_INFO, QUIC's RTT estimator); None where none was read (WebSocket, a failure).
    rtt: PathRtt | None = None

    # -- appending facts -------------------------------------------------------------
    def begin(self, name: StageName, t_ns: int, **detail: object) -> Stage:
        stage = Stage(name=name, start_ns=t_ns, detail=dict(detail))
        self.stages.append(stage)
        return stage

    def end(self, name: StageName, t_ns: int, *, ok: bool = True) -> Stage | None:
        for stage in reversed(self.stages):
            if stage.name == name and stage.end_ns is None:
                stage.end_ns = t_ns
                stage.ok = ok
                return stage
        return None

    def mark(self, name: str, t_ns: int) -> None:
        """Record a milestone once; the first time wins."""
        self.milestones.setdefault(name, t_ns)

    def add_read(self, t_ns: int, nbytes: int, waited_ns: int = 0) -> int:
        """One socket read (or datagram) returned at ``t_ns``: kept up to MAX_KEPT_READS,
        counted past it. Its ordinal, which indexes ``reads`` while it was kept."""
        kept = self.reads
        over = self.reads_not_kept
        if not over.reads and len(kept) < MAX_KEPT_READS:
            kept.append(Read(t_ns, nbytes, waited_ns))
            return len(kept) - 1
        over.reads += 1
        over.read_bytes += nbytes
        over.last_ns = t_ns
        over.last_nbytes = nbytes
        return len(kept) + over.reads - 1

    def add_chunk(self, t_ns: int, nbytes: int, read_index: int) -> None:
        """Body bytes from the HTTP layer: kept up to MAX_KEPT_READS, counted past it."""
        over = self.reads_not_kept
        if not over.chunks and len(self.chunks) < MAX_KEPT_READS:
            self.chunks.append(BodyChunk(t_ns=t_ns, nbytes=nbytes, read_index=read_index))
        else:
            over.chunks += 1
            over.chunk_bytes += nbytes

    # -- reading facts ---------------------------------------------------------------
    @property
    def current_stage(self) -> StageName | None:
        """The innermost stage still open (where a failure or timeout happened)."""
        for stage in reversed(self.stages):
            if stage.end_ns is None:
                return stage.name
        return None

    def stage(self, name: str) -> Stage | None:
        for stage in self.stages:
            if stage.name == name:
                return stage
        return None

    @property
    def read_count(self) -> int:
        """Every socket read, kept or only counted (the JSON's ``socket_reads``)."""
        return len(self.reads) + self.reads_not_kept.reads

    @property
    def last_read_ns(self) -> int | None:
        """When the last read returned, kept or not."""
        over = self.reads_not_kept
        if over.reads:
            return over.last_ns
        return self.reads[-1].t_ns if self.reads else None

    def read_at(self, index: int) -> Read | None:
        """The read with ordinal ``index``, if it was kept (or is the last one); else None."""
        if 0 <= index < len(self.reads):
            return self.reads[index]
        over = self.reads_not_kept
        if over.reads and over.last_ns is not None and index == self.read_count - 1:
            return Read(over.last_ns, over.last_nbytes)
        return None

    @property
    def body_bytes(self) -> int:
        """Response-body bytes the HTTP layer handed over, in chunks kept or not."""
        return sum(c.nbytes for c in self.chunks) + self.reads_not_kept.chunk_bytes

    def read_bytes_after(self, t_ns: int, until_ns: int | None = None) -> tuple[int, bool]:
        """Bytes read after ``t_ns`` (up to ``until_ns``), and whether that is exact: past
        the cap the reads not kept are one sum, exact only when they all came after
        ``t_ns`` (and none after ``until_ns``, else they are left out)."""
        end = until_ns if until_ns is not None else self.last_read_ns or t_ns
        nbytes = sum(r.nbytes for r in self.reads if t_ns < r.t_ns <= end)
        over = self.reads_not_kept
        if not over.reads or over.last_ns is None or over.last_ns <= t_ns:
            return nbytes, True
        if over.last_ns > end:
            return nbytes, False
        exact = bool(self.reads) and self.reads[-1].t_ns >= t_ns
        return nbytes + over.read_bytes, exact

    @property
    def closing_ns(self) -> int | None:
        """When our own close began, if the reads after it are its handshake rather than
        the response: a WebSocket's Close frame of ours (net/websocket.py reads the
        server's reply, and whatever crossed our Close, before it lets go). None else."""
        ws = self.websocket
        if ws is not None and ws.close_by == "client":
            return ws.close_ns
        return None

    def last_read_until(self, t_ns: int) -> int | None:
        """When the last read at or before ``t_ns`` returned (of the reads kept, once some
        past the cap came after ``t_ns``)."""
        over = self.reads_not_kept
        if over.reads and over.last_ns is not None and over.last_ns <= t_ns:
            return over.last_ns
        return next((r.t_ns for r in reversed(self.reads) if r.t_ns <= t_ns), None)

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.response_headers:
            if key.lower() == name:
                return value
        return None

    def ms(self, t_ns: int | None) -> float | None:
        """Offset of a stamp from t0, in milliseconds."""
        return None if t_ns is None else (t_ns - self.t0_ns) / 1e6

"""What each probe can be told, with its defaults and bounds: one frozen dataclass per probe.

The probes read these from ``ProbeContext.settings``. A command-line option names the
field it fills (``Flag.setting``, e.g. ``"dns_cache.recheck_s"``) and resolve.py fills
them all from the table, so a new probe option is its Flag row, its field here, and the
probe code that reads it. Each dataclass checks its own values (a bad one is a UsageError
naming the option) and holds only its probe's settings: the probe's folder is its only
reader (the canary's are read by every probe that talks to ``promptpath serve``).

They live here, not in each probe's folder, because `--help` (which shows the defaults)
and every plan read them all: this module imports only the error tree, so neither pays
for a probe's sockets, httpx or tracer, and it is one module, not ten (a settings module
per folder, with its package, measured 1 to 1.4 ms more on every `--help`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from promptpath.core.errors import UsageError

ControlsVia = Literal["both", "headers", "body"]
#: How --canary probes send their controls (probes/canary.py).
VIA_CHOICES: tuple[str, ...] = get_args(ControlsVia)


@dataclass(frozen=True, slots=True, kw_only=True)
class CanarySettings:
    """--canary, --canary-controls: the target is ``promptpath serve`` and obeys controls."""

    on: bool = False
    controls: ControlsVia = "both"

    def __post_init__(self) -> None:
        if self.controls not in VIA_CHOICES:
            raise UsageError(f"--canary-controls must be one of {', '.join(VIA_CHOICES)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class DNSCacheSettings:
    """--dns-recheck, --authoritative (the dns-cache probe)."""

    #: Two whole-second TTLs closer together than this may be equal (dns_cache.signals'
    #: MIN_COUNTDOWN_S, held equal by a unit test).
    MIN_RECHECK_S = 2.0
    #: Longest pause between the two TTL queries the probe will wait.
    MAX_RECHECK_S = 60.0

    recheck_s: float = 3.0
    authoritative: str | None = None  # ADDR[:PORT] of the zone's authoritative server

    def __post_init__(self) -> None:
        if self.recheck_s < self.MIN_RECHECK_S:
            raise UsageError(
                f"--dns-recheck must be at least {self.MIN_RECHECK_S:g} s: two whole-second"
                " TTLs closer together may be equal"
            )
        if self.authoritative is not None:
            from promptpath.net.dnsmsg import parse_server  # only when one is given

            try:
                parse_server(self.authoritative)
            except UsageError as exc:
                raise UsageError(f"--authoritative: {exc.message}", kind="bad_option") from exc

    def recheck(self) -> float:
        """The pause the probe waits, at most MAX_RECHECK_S."""
        return min(self.recheck_s, self.MAX_RECHECK_S)


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleTimeoutSettings:
    """--idle-max (the idle-timeout probe): the longest idle wait, seconds."""

    max_s: float = 120.0

    def __post_init__(self) -> None:
        if not self.max_s > 0:
            raise UsageError("--idle-max must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class GhostStreamSettings:
    """--canary-admin (the ghost-stream probe): the canary's own address, if not the path's."""

    admin: str | None = None

    def __post_init__(self) -> None:
        if self.admin is not None:
            check_admin_url(self.admin)


def check_admin_url(url: str) -> None:
    """--canary-admin: http(s)://HOST[:PORT][/PATH], found wrong before the run rather than
    by the probe after it; quoted without its userinfo (sent as Basic)."""
    from urllib.parse import urlsplit

    from promptpath.core.urlsafe import shown_url

    wants = f"--canary-admin wants http(s)://HOST[:PORT], got {shown_url(url)!r}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - urlsplit checks brackets and the port lazily
    except ValueError as exc:
        raise UsageError(f"{wants} ({exc})", kind="bad_option") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(wants, kind="bad_option")
    if parts.query or parts.fragment:
        raise UsageError("--canary-admin takes no query or fragment", kind="bad_option")


@dataclass(frozen=True, slots=True, kw_only=True)
class TLSSettings:
    """--tls-warn-days, --tls-fail-days (the tls probe)."""

    warn_days: int = 30
    fail_days: int = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class PathSettings:
    """--path-names (the path probe): look up the hops' reverse names (PTR), off by default
    so that no PTR query leaves unless asked."""

    names: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgesSettings:
    """--edges-max, --edges-request, --edges-resolver (the edges probe)."""

    #: The most addresses --edges-max may ask for: each costs a few connects and a handshake.
    MAX_ADDRESSES = 32

    max_addresses: int = 8
    request: bool = False  # one HEAD per address (no key, no body: no tokens)
    resolvers: tuple[str, ...] | None = None  # ADDR[:PORT] of resolvers to compare

    def __post_init__(self) -> None:
        if not 1 <= self.max_addresses <= self.MAX_ADDRESSES:
            raise UsageError(f"--edges-max must be 1 to {self.MAX_ADDRESSES}", kind="bad_option")
        if self.resolvers:
            # A repeatable option arrives as a list: kept as a tuple (the Plan is frozen).
            object.__setattr__(self, "resolvers", tuple(self.resolvers))
            from promptpath.net.dnsmsg import parse_server  # only when one is given

            for spec in self.resolvers:
                try:
                    parse_server(spec)
                except UsageError as exc:
                    raise UsageError(f"--edges-resolver: {exc.message}", kind="bad_option") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillSettings:
    """--prefill-sizes, --prefill-repeats (the prefill probe): the prompt sizes, in input
    tokens, and how many times each is sent (interleaved)."""

    MAX_TOKENS = 200_000  # a size past this is a typo, not a prompt
    MAX_REPEATS = 50

    sizes: str = "256,1024,3072"
    repeats: int = 3

    def __post_init__(self) -> None:
        try:
            values = self.values()
        except ValueError:
            raise UsageError(
                f"--prefill-sizes must be comma-separated token counts, got {self.sizes!r}",
                kind="bad_option",
            ) from None
        if len(set(values)) < 2 or any(not 16 <= v <= self.MAX_TOKENS for v in values):
            raise UsageError(
                "--prefill-sizes needs at least two different sizes between 16 and"
                f" {self.MAX_TOKENS:,} tokens",
                kind="bad_option",
            )
        if not 1 <= self.repeats <= self.MAX_REPEATS:
            raise UsageError(
                f"--prefill-repeats must be between 1 and {self.MAX_REPEATS}", kind="bad_option"
            )

    def values(self) -> tuple[int, ...]:
        """The sizes, smallest first (ValueError when one is not a whole number)."""
        return tuple(sorted(int(v.replace("_", "")) for v in self.sizes.split(",") if v.strip()))


@dataclass(frozen=True, slots=True, kw_only=True)
class HolSettings:
    """--hol-streams (the hol probe): streams at once on the shared connection, and as
    many on separate ones (and on HTTP/3)."""

    MIN_STREAMS = 2
    #: Each group is this many prompts at once: the cap keeps one probe's spend bounded.
    MAX_STREAMS = 32

    streams: int = 4

    def __post_init__(self) -> None:
        if not self.MIN_STREAMS <= self.streams <= self.MAX_STREAMS:
            raise UsageError(
                f"--hol-streams must be {self.MIN_STREAMS} to {self.MAX_STREAMS}, got"
                f" {self.streams}: a co-stall needs two streams sharing a connection"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSettings:
    """Every probe's settings; a probe reads its own field."""

    canary: CanarySettings = field(default_factory=CanarySettings)
    dns_cache: DNSCacheSettings = field(default_factory=DNSCacheSettings)
    idle_timeout: IdleTimeoutSettings = field(default_factory=IdleTimeoutSettings)
    ghost_stream: GhostStreamSettings = field(default_factory=GhostStreamSettings)
    tls: TLSSettings = field(default_factory=TLSSettings)
    path: PathSettings = field(default_factory=PathSettings)
    edges: EdgesSettings = field(default_factory=EdgesSettings)
    prefill: PrefillSettings = field(default_factory=PrefillSettings)
    hol: HolSettings = field(default_factory=HolSettings)

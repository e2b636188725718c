"""Where else an origin says it can be reached: Alt-Svc (RFC 7838) and HTTPS records (RFC 9460).

``parse_alt_svc`` is pure and never raises: a malformed alternative is skipped and named in
``problems``, the rest of the field still counts (as browsers do). ``https_record`` asks DNS
for the origin's HTTPS RR with dnspython, imported only when it is called.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

#: RFC 7838 §3.1: an alternative without ``ma`` is fresh for 24 hours.
DEFAULT_MAX_AGE = 86400

_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True, slots=True, kw_only=True)
class AltService:
    """One alternative service an origin advertised."""

    protocol: str  # ALPN id, percent-decoded: "h3", "h3-29", "h2"
    host: str | None  # None: the origin's own host
    port: int
    max_age: int  # seconds the advertisement stays fresh
    persist: bool  # survives network changes (persist=1)
    params: tuple[tuple[str, str], ...] = ()  # any other parameters, as sent

    @property
    def authority(self) -> str:
        """As written in the header: ``host:port`` or ``:port``."""
        host = self.host or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class AltSvc:
    """Every Alt-Svc field of one response, parsed."""

    services: tuple[AltService, ...] = ()
    clear: bool = False  # "clear": forget every alternative of this origin
    problems: tuple[str, ...] = ()  # what we skipped, and why

    def by_protocol(self, protocol: str) -> AltService | None:
        return next((s for s in self.services if s.protocol == protocol), None)


class _Malformed(ValueError):
    pass


class _Scanner:
    """A cursor over one header value, with the RFC 7230 token/quoted-string rules."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ows(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = repr(self.peek()) if self.peek() else "end of field"
            raise _Malformed(f"expected {char!r} at offset {self.pos}, found {found}")
        self.pos += 1

    def token(self) -> str:
        start = self.pos
        while self.peek() and self.peek() in _TCHAR:
            self.pos += 1
        if self.pos == start:
            found = repr(self.peek()) if self.peek() else "end of field"
            raise _Malformed(f"expected a token at offset {start}, found {found}")
        return self.text[start : self.pos]

    def quoted(self) -> str:
        self.expect('"')
        out: list[str] = []
        while True:
            char = self.peek()
            if not char:
                raise _Malformed("unterminated quoted string")
            self.pos += 1
            if char == '"':
                return "".join(out)
            if char == "\\":
                if self.at_end():
                    raise _Malformed("unterminated quoted string")
                out.append(self.text[self.pos])
                self.pos += 1
            else:
                out.append(char)

    def skip_to_comma(self) -> None:
        """Resynchronise after an error: jump past the next comma outside quotes."""
        quoted = False
        while not self.at_end():
            char = self.text[self.pos]
            self.pos += 1
            if quoted and char == "\\":
                self.pos += 1
            elif char == '"':
                quoted = not quoted
            elif char == "," and not quoted:
                return


def _authority(raw: str) -> tuple[str | None, int]:
    """``[host]:port`` inside the quotes (RFC 7838 §3: the host may be empty)."""
    host, sep, port_s = raw.rpartition(":")
    if not sep:
        raise _Malformed(f"alt-authority {raw!r} has no port")
    if not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise _Malformed(f"alt-authority {raw!r} has a bad port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError as exc:
            raise _Malformed(f"alt-authority {raw!r} has a bad IPv6 literal") from exc
    elif ":" in host or any(c.isspace() for c in host):
        raise _Malformed(f"alt-authority {raw!r} has a bad host")
    return (host or None), int(port_s)


def _alternative(scan: _Scanner) -> AltService:
    protocol_raw = scan.token()
    protocol = unquote(protocol_raw)
    scan.expect("=")
    if scan.peek() != '"':
        raise _Malformed(f"{protocol_raw}: alt-authority must be a quoted string")
    host, port = _authority(scan.quoted())
    max_age, persist = DEFAULT_MAX_AGE, False
    params: list[tuple[str, str]] = []
    while True:
        scan.skip_ows()
        if scan.peek() != ";":
            break
        scan.pos += 1
        scan.skip_ows()
        if scan.peek() in ("", ","):
            break  # a trailing ";" is harmless
        name = scan.token().lower()
        scan.expect("=")
        value = scan.quoted() if scan.peek() == '"' else scan.token()
        if name == "ma":
            if not value.isdigit():
                raise _Malformed(f"{protocol}: ma={value!r} is not a number of seconds")
            max_age = int(value)
        elif name == "persist":
            persist = value == "1"  # other values: ignored (RFC 7838 §3.1)
        else:
            params.append((name, value))
    return AltService(
        protocol=protocol,
        host=host,
        port=port,
        max_age=max_age,
        persist=persist,
        params=tuple(params),
    )


def parse_alt_svc(values: str | Iterable[str]) -> AltSvc:
    """Parse one or several Alt-Svc field values (several fields form one list)."""
    fields = [values] if isinstance(values, str) else list(values)
    services: list[AltService] = []
    problems: list[str] = []
    clear = False
    for value in fields:
        if value.strip() == "clear":
            clear = True
            continue
        scan = _Scanner(value)
        while True:
            scan.skip_ows()
            if scan.at_end():
                break
            if scan.peek() == ",":  # empty list elements are allowed (RFC 7230 §7)
                scan.pos += 1
                continue
            start = scan.pos
            try:
                if scan.text.startswith("clear", scan.pos) and scan.text[
                    scan.pos + 5 : scan.pos + 6
                ] in ("", ",", " ", "\t"):
                    raise _Malformed("'clear' must be the only value of the field")
                service = _alternative(scan)
                scan.skip_ows()
                if not scan.at_end():
                    scan.expect(",")
                services.append(service)  # only once it ended where an element ends
            except _Malformed as exc:
                scan.skip_to_comma()
                snippet = value[start : scan.pos].rstrip(", ")
                problems.append(f"ignored {snippet!r}: {exc}")
    return AltSvc(services=tuple(services), clear=clear, problems=tuple(problems))


# -- DNS HTTPS records (RFC 9460) ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPSRecord:
    """One HTTPS resource record, in the terms a client uses to connect."""

    priority: int  # 0: AliasMode (only ``target`` counts)
    target: str  # "." means the owner name itself
    alpn: tuple[str, ...] = ()
    no_default_alpn: bool = False
    port: int | None = None
    ipv4hint: tuple[str, ...] = ()
    ipv6hint: tuple[str, ...] = ()
    ech: bool = False
    ttl: int | None = None

    @property
    def alias(self) -> bool:
        return self.priority == 0


def https_qname(host: str, port: int = 443) -> str:
    """The owner name to query: ``_PORT._https.host`` for a non-default port (RFC 9460 §9.1)."""
    host = host.rstrip(".")
    return host if port == 443 else f"_{port}._https.{host}"


def record_from_rdata(rdata: Any, ttl: int | None = None) -> HTTPSRecord:
    """An ``HTTPSRecord`` from a dnspython HTTPS (or SVCB) rdata."""
    from dns.rdtypes.svcbbase import ParamKey

    params = rdata.params
    alpn_param = params.get(ParamKey.ALPN)
    port_param = params.get(ParamKey.PORT)
    v4 = params.get(ParamKey.IPV4HINT)
    v6 = params.get(ParamKey.IPV6HINT)

    def text(value: bytes | str) -> str:
        return value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)

    return HTTPSRecord(
        priority=int(rdata.priority),
        target=rdata.target.to_text(),
        alpn=tuple(text(i) for i in alpn_param.ids) if alpn_param is not None else (),
        no_default_alpn=ParamKey.NO_DEFAULT_ALPN in params,
        port=None if port_param is None else int(port_param.port),
        ipv4hint=tuple(str(a) for a in v4.addresses) if v4 is not None else (),
        ipv6hint=tuple(str(a) for a in v6.addresses) if v6 is not None else (),
        ech=ParamKey.ECH in params,
        ttl=ttl,
    )


async def https_record(
    host: str,
    *,
    port: int = 443,
    resolver: str | None = None,
    timeout: float = 3.0,
) -> tuple[HTTPSRecord, ...]:
    """The origin's HTTPS records, lowest priority first; () when it has none.

    ``resolver`` is ``ADDR[:PORT]`` of a server to ask instead of the system's (a
    malformed one raises ``UsageError``, as ``--resolver`` does). DNS trouble (timeout,
    SERVFAIL, refused) raises ``LookupError`` with what happened.
    """
    from promptpath.net.dnsfeatures import plain_dns_only

    plain_dns_only()
    import dns.asyncresolver
    import dns.exception
    import dns.resolver

    try:
        res = dns.asyncresolver.Resolver(configure=resolver is None)
    except dns.exception.DNSException as exc:  # no /etc/resolv.conf, no nameserver
        raise LookupError(f"no resolver to ask for HTTPS records: {exc}") from exc
    if resolver is not None:
        from promptpath.net.dnsmsg import parse_server  # a lookup only: not for Alt-Svc

        addr, dport = parse_server(resolver)
        res.nameservers = [addr]
        res.port = dport
    res.lifetime = timeout
    res.timeout = timeout
    qname = https_qname(host, port)
    try:
        answer = await res.resolve(qname, "HTTPS", search=False, raise_on_no_answer=False)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return ()
    except dns.exception.Timeout as exc:
        raise LookupError(f"HTTPS query for {qname} timed out after {timeout:g} s") from exc
    except dns.exception.DNSException as exc:
        raise LookupError(f"HTTPS query for {qname} failed: {exc}") from exc
    rrset = answer.rrset
    if rrset is None:
        return ()
    records = [record_from_rdata(r, ttl=rrset.ttl) for r in rrset]
    return tuple(sorted(records, key=lambda r: r.priority))

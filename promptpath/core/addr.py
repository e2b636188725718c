"""Addresses as every layer writes and judges them: one place, no sockets, no DNS."""

from __future__ import annotations

import ipaddress


def fmt_addr(ip: str, port: int) -> str:
    """``ip:port``, with an IPv6 address in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def is_loopback(host: str) -> bool:
    """An address in 127.0.0.0/8 or ::1, or a name RFC 6761 §6.3 keeps on loopback
    (``localhost`` and ``*.localhost``). Brackets and a trailing dot are ignored; any
    other name is not loopback (this never asks DNS)."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


#: RFC 1035 §2.3.4: a label holds at most 63 octets, a name 255 on the wire (253 written).
MAX_LABEL = 63
MAX_NAME = 253


def wire_host(host: str) -> str:
    """``host`` as it goes on the wire (DNS, Host, SNI, CONNECT): an IP literal as it is,
    a name in ASCII; an internationalised name IDNA-encoded (IDNA 2008, lower-cased first,
    as httpx encodes it for the OpenAI and Anthropic SDKs: ``exämple.test`` is
    ``xn--exmple-cua.test``). ValueError says why ``host`` cannot be a host name (Python's
    own idna codec refused it deep in getaddrinfo or the TLS handshake: exit 70)."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if not host.isascii():
        import idna  # lazily: only an internationalised name needs it

        try:
            host = idna.encode(host.lower()).decode("ascii")
        except UnicodeError as exc:  # idna.IDNAError is one
            raise ValueError(f"is not a valid internationalised name ({exc})") from None
    name = host.removesuffix(".")  # one trailing dot: the root, a fully qualified name
    if len(name) > MAX_NAME:
        raise ValueError(f"is longer than {MAX_NAME} characters")
    for label in name.split("."):
        if not label:
            raise ValueError("has an empty label")
        if len(label) > MAX_LABEL:
            raise ValueError(f"has a label longer than {MAX_LABEL} characters")
    return host


__all__ = ["MAX_LABEL", "MAX_NAME", "fmt_addr", "is_loopback", "wire_host"]

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


__all__ = ["fmt_addr", "is_loopback"]

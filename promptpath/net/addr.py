"""How an address and port are written (IPv6 in brackets): one place for every module."""

from __future__ import annotations


def fmt_addr(ip: str, port: int) -> str:
    """``ip:port``, with an IPv6 address in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


__all__ = ["fmt_addr"]

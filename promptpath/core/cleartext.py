"""Where an API key bound for plain ``http://`` would travel in clear: the pure decision
(the tracer refuses with it before dialling, the report words what happened with it)."""

from __future__ import annotations

from collections.abc import Sequence

from promptpath.core.addr import is_loopback


def exposed(
    *,
    scheme: str,
    key_sent: bool,
    addresses: Sequence[str],
    target_host: str,
    proxy_scheme: str | None = None,
) -> list[str]:
    """Where the key would travel in clear beyond this machine (empty: nowhere).

    ``proxy_scheme``: the forward proxy's scheme, None when the run goes direct."""
    if scheme != "http" or not key_sent:
        return []
    if proxy_scheme is None:
        return [ip for ip in addresses if not is_loopback(ip)]
    # Through a proxy the key goes to the proxy (in clear unless it is https://), and the
    # proxy forwards it in clear to the origin, whose address only the proxy learns.
    out = [] if proxy_scheme == "https" else [ip for ip in addresses if not is_loopback(ip)]
    if not is_loopback(target_host):
        out.append(f"{target_host} (through the proxy)")
    return out


def cleartext_note(
    *,
    scheme: str,
    key_sent: bool,
    address: str | None,
    target_host: str,
    proxy_scheme: str | None = None,
) -> str | None:
    """The note the report carries when a key did go over plain http:// to ``address``."""
    if scheme != "http" or not key_sent or address is None:
        return None
    where = exposed(
        scheme=scheme,
        key_sent=key_sent,
        addresses=[address],
        target_host=target_host,
        proxy_scheme=proxy_scheme,
    )
    if not where:
        return f"the API key went over plain http:// to loopback {address} (never off it)"
    return f"the API key went over plain http:// to {address} in clear (--allow-cleartext)"


__all__ = ["cleartext_note", "exposed"]

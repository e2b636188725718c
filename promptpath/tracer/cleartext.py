"""An API key bound for plain ``http://``: refused off loopback unless ``--allow-cleartext``.

Decided once the addresses are known (after the dns stage, before the transport dials), so
a name that resolves to loopback counts as loopback and nothing has been sent either way.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from promptpath.core.errors import UsageError
from promptpath.options import RunOptions
from promptpath.tracer.request import key_sent


def is_loopback(host: str) -> bool:
    """An address in 127.0.0.0/8 or ::1, or a name RFC 6761 keeps on loopback."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _exposed(options: RunOptions, addresses: Sequence[str]) -> list[str]:
    """Where the key would travel in clear beyond this machine (empty: nowhere)."""
    if options.target.scheme != "http" or not key_sent(options):
        return []
    proxy = options.proxy
    if proxy is None:
        return [ip for ip in addresses if not is_loopback(ip)]
    # Through a proxy the key goes to the proxy (in clear unless it is https://), and the
    # proxy forwards it in clear to the origin, whose address only the proxy learns.
    exposed = [] if proxy.scheme == "https" else [ip for ip in addresses if not is_loopback(ip)]
    if not is_loopback(options.target.host):
        exposed.append(f"{options.target.host} (through the proxy)")
    return exposed


def check_cleartext(options: RunOptions, addresses: Sequence[str]) -> None:
    """Raise a usage error (exit 2) when the key would cross a network in clear."""
    exposed = _exposed(options, addresses)
    if exposed and not options.allow_cleartext:
        raise UsageError(
            f"refusing to send the API key over plain http:// to {', '.join(exposed)}: anyone"
            " on the path can read it. Use https://, or --allow-cleartext if this network is"
            " yours",
            kind="cleartext_key",
        )


def cleartext_note(options: RunOptions, address: str | None) -> str | None:
    """The note the report carries when a key did go over plain http://."""
    if options.target.scheme != "http" or not key_sent(options) or address is None:
        return None
    if not _exposed(options, [address]):
        return f"the API key went over plain http:// to loopback {address} (never off it)"
    return f"the API key went over plain http:// to {address} in clear (--allow-cleartext)"

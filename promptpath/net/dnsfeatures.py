"""dnspython for plain DNS only: its DNS-over-HTTPS and DNS-over-QUIC code left unloaded.

dnspython 2.x decides when ``dns.query`` and ``dns.quic`` are first imported whether to
load httpcore2/httpx2/h2 (DoH) and aioquic (DoQ), from the installed packages' metadata
(``dns._features``). aioquic is installed beside promptpath (it is our HTTP/3), httpx2 in
the dev extra (google-genai), and ``import dns.asyncresolver`` then took ~0.4 s on a loaded
2-core machine (``python -X importtime``: httpcore2 0.13 s, aioquic's h3 0.09 s), paid
after a run's end by its HTTPS-record lookup, or before t0 by ``--resolver``. promptpath
asks over UDP and TCP only, so before that first import it tells dnspython neither is
available, through ``dns._features.force``: the function dnspython provides for this.
"""

from __future__ import annotations

import sys

#: The dnspython features promptpath never uses (its queries go over UDP and TCP).
UNUSED = ("doh", "doq")


def plain_dns_only() -> None:
    """Before the first import of dnspython's query modules: no DoH, no DoQ. (After it,
    nothing changes: dnspython has decided already.)"""
    if "dns.query" in sys.modules:
        return
    import dns._features

    for feature in UNUSED:
        dns._features.force(feature, False)


__all__ = ["UNUSED", "plain_dns_only"]

"""An API key bound for plain ``http://``: refused off loopback unless ``--allow-cleartext``.

Decided once the addresses are known (after the dns stage, before the transport dials), so
a name that resolves to loopback counts as loopback and nothing has been sent either way.
The decision itself is pure and lives in ``core/cleartext.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from promptpath.core import cleartext
from promptpath.core.errors import UsageError
from promptpath.options import RunOptions
from promptpath.tracer.request import key_sent


def _exposed(options: RunOptions, addresses: Sequence[str]) -> list[str]:
    proxy = options.proxy
    return cleartext.exposed(
        scheme=options.target.scheme,
        key_sent=key_sent(options),
        addresses=addresses,
        target_host=options.target.host,
        proxy_scheme=None if proxy is None else proxy.scheme,
    )


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


__all__ = ["check_cleartext"]

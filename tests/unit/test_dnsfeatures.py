"""dnspython loads its DoH (httpcore2, httpx2, h2) and DoQ (aioquic) code when those packages
are installed, which they are beside promptpath; net/dnsfeatures.py keeps them out of
`import dns.asyncresolver` (0.4 s of imports on a loaded machine, measured)."""

from __future__ import annotations

import subprocess
import sys

_LOADED = (
    "import sys, dns.asyncresolver, dns.query;"
    " print(sorted({m.split('.')[0] for m in sys.modules} & {'aioquic', 'httpcore2', 'httpx2'}))"
)


def _loaded(prelude: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", prelude + _LOADED], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_dnspython_loads_aioquic_for_doq_unless_told_not_to() -> None:
    # The premise: aioquic is a dependency of promptpath, so plain dnspython loads it.
    assert "'aioquic'" in _loaded("")
    told = "from promptpath.net.dnsfeatures import plain_dns_only; plain_dns_only();"
    assert _loaded(told) == "[]"

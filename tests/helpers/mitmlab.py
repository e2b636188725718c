"""mitmproxy on loopback for lab tests: ``mitmdump`` with its CA and state in a temp dir.

mitmproxy pins older aioquic, h11 and cryptography than promptpath, so it lives in a
virtual environment of its own: ``.ci/run`` installs mitmproxy 11.0.2 into
``.lab/mitmproxy`` in the checkout (gitignored). A ``mitmdump`` on PATH does too.

``--set confdir=DIR`` keeps everything in the temp dir: mitmdump writes its CA there on
start (``DIR/mitmproxy-ca-cert.pem``, issuer ``CN=mitmproxy, O=mitmproxy``), which is
what a client passes with ``--cacert`` to trust the certificates it forges.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.conftest import lab_required
from tests.helpers import proxylab

#: Where .ci/run puts mitmproxy's own virtual environment.
LAB_VENV = Path(__file__).resolve().parents[2] / ".lab" / "mitmproxy"
CA_FILE = "mitmproxy-ca-cert.pem"


def mitmdump_binary() -> str:
    """Path of ``mitmdump``, or skip (a failure under PROMPTPATH_REQUIRE_LAB=1)."""
    candidate = LAB_VENV / "bin" / "mitmdump"
    if candidate.exists():
        return str(candidate)
    path = shutil.which("mitmdump")
    if path:
        return path
    reason = (
        "mitmdump is not installed (.ci/run installs mitmproxy==11.0.2 into .lab/mitmproxy:"
        " python3 -m venv .lab/mitmproxy && .lab/mitmproxy/bin/pip install mitmproxy==11.0.2)"
    )
    if lab_required():
        pytest.fail(f"PROMPTPATH_REQUIRE_LAB=1 but {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def mitmdump(
    tmp_path: Path,
    *,
    mode: str = "regular",
    upstream_ca: str | None = None,
    stream: bool = False,
    options: Sequence[str] = (),
) -> Iterator[proxylab.Proxy]:
    """``mitmdump --mode MODE`` on a free 127.0.0.1 port until the block ends.

    ``mode`` is ``regular`` (a forward proxy: CONNECT, intercepting TLS) or
    ``reverse:URL`` (in front of URL; clients speak TLS or plain HTTP to it).
    ``upstream_ca`` is the CA mitmdump trusts for the upstream's certificate; ``stream``
    sets ``stream_large_bodies=1`` (stream every body instead of holding it whole);
    ``options`` are further ``--set NAME=VALUE`` strings. The proxy's ``ca`` is the CA
    its forged certificates chain to; its ``url`` is http:// in regular mode (a proxy
    URL) and https:// in reverse mode.
    """
    binary = mitmdump_binary()
    directory = tmp_path / f"mitmdump-{time.monotonic_ns()}"
    directory.mkdir(parents=True)
    port = proxylab.free_port()
    sets = [f"confdir={directory}"]
    if upstream_ca is not None:
        sets.append(f"ssl_verify_upstream_trusted_ca={upstream_ca}")
    if stream:
        sets.append("stream_large_bodies=1")
    sets += list(options)
    args = [binary, "--mode", mode, "--listen-host", proxylab.LOOPBACK]
    args += ["--listen-port", str(port)]
    for item in sets:
        args += ["--set", item]
    # HOME in the temp dir as well: nothing is read from or written to the developer's
    # ~/.mitmproxy, and no proxy variable reaches it.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(directory)}
    scheme = "http" if mode == "regular" else "https"
    ca = str(directory / CA_FILE)
    with proxylab._running("mitmdump", args, port, directory, scheme=scheme, ca=ca, env=env) as px:
        if not Path(ca).exists():  # written at start-up, before it listens
            pytest.fail(f"mitmdump listens but wrote no {CA_FILE}\n{px.logs()}")
        yield px

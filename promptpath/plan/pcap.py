"""--pcap checked before the first packet: the destination, a way to capture, the key.

Refused (exit 2, before any request):
- no way to capture: neither dumpcap on the PATH nor CAP_NET_RAW for a packet socket;
- an API key (or a forward proxy's password) that would travel in clear, over an
  http:// target or proxy: the capture would hold it as it went. Over TLS the key is
  encrypted on the wire, but the secrets in the file decrypt it: the file is as
  sensitive as the key (docs/security.md), and --help says so.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from promptpath.core.addr import is_loopback
from promptpath.core.errors import UsageError
from promptpath.options import RunOptions
from promptpath.outputs.pcap import PcapPlan

NO_WAY = (
    "--pcap: no way to capture packets here: install Wireshark's dumpcap (Debian: the"
    " wireshark-common package) and put it on the PATH, or run with CAP_NET_RAW (root, or"
    " `setcap cap_net_raw+ep` on the Python binary) for a packet socket"
)


def _loopback_only(options: RunOptions) -> bool:
    """Whether every address the run may reach is loopback (then ``lo`` is enough)."""
    if options.resolver is not None:
        from promptpath.net.dnsmsg import parse_server

        if not is_loopback(parse_server(options.resolver)[0]):
            return False  # its queries leave on the route's interface
    pins = {host.lower(): addr for host, _port, addr in options.resolve}
    target = options.target.host.strip("[]")
    hosts = [pins.get(target.lower(), target)]
    hosts += [pins.get(c.to_host.lower(), c.to_host) for c in options.connect_to if c.to_host]
    if options.proxy is not None:
        hosts.append(pins.get(options.proxy.host.lower(), options.proxy.host))
    return all(is_loopback(h) for h in hosts)


def _check_directory(path: Path) -> None:
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".promptpath-pcap.", suffix=".check"):
            pass
    except OSError as exc:
        raise UsageError(
            f"--pcap {path}: cannot write there ({exc.strerror or exc})", kind="bad_option"
        ) from exc


def plan_pcap(
    value: str | None, options: RunOptions, environ: Mapping[str, str]
) -> PcapPlan | None:
    """The capture asked for, checked; None without --pcap. UsageError otherwise."""
    if value is None:
        return None
    from promptpath.tracer.request import key_sent

    if options.target.scheme == "http" and key_sent(options):
        raise UsageError(
            "--pcap: the API key would go over plain http:// and sit in the capture in"
            " clear; capture an https:// target, or run without a key",
            kind="cleartext_key",
        )
    proxy = options.proxy
    if proxy is not None and proxy.scheme == "http" and proxy.password:
        raise UsageError(
            f"--pcap: the proxy password would go to {proxy.url} in clear and sit in the"
            " capture; use an https:// proxy or none",
            kind="cleartext_key",
        )
    if not hasattr(os, "memfd_create"):
        raise UsageError(
            "--pcap needs Linux: the secrets are held in a memory-only file (memfd)",
            kind="bad_option",
        )
    path = Path(value)
    directory = path.is_dir()
    if directory:
        _check_directory(path)
    else:
        from promptpath.outputs.deliver import check_writable

        check_writable(path, "--pcap")
    from promptpath.net.capture import available_way

    way = available_way(environ)
    if way is None:
        raise UsageError(NO_WAY, kind="bad_option")
    interface = "lo" if _loopback_only(options) else "any"
    return PcapPlan(
        path=Path(os.path.abspath(path)), directory=directory, way=way, interface=interface
    )


__all__ = ["NO_WAY", "plan_pcap"]

"""Real forward proxies on loopback for lab tests: squid and tinyproxy.

Each gets its own config, pid and logs in a fresh directory under /tmp (squid's workers
and helpers run as the unprivileged ``proxy`` user, which cannot enter pytest's 0700 temp
dirs), listens on a free 127.0.0.1 port, never pings and resolves names only from
/etc/hosts or a loopback resolver, and is stopped when the block ends.

Observed by hand (squid 5.7, tinyproxy 1.11.1, curl 7.88 as the client):
- squid answers CONNECT with ``HTTP/1.1 200 Connection established`` and no headers;
  with ``proxy_auth REQUIRED`` and no credentials, ``407 Proxy Authentication Required``
  (``Server: squid/5.7``); a CONNECT to a port an ACL denies, ``403 Forbidden``.
- squid with ``https_port ... tls-cert=`` is an https:// proxy: TLS to the proxy first,
  then CONNECT inside it (curl ``--proxy https://... --proxy-cacert``).
- tinyproxy answers CONNECT with ``HTTP/1.0 200 Connection established`` and
  ``Proxy-agent: tinyproxy/1.11.1``; a ``ConnectPort`` line that does not list the port
  gives ``403 Access violation``; plain-http requests go in absolute form.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import require_binary
from tests.helpers.proxylab import Proxy, _running, free_port

SQUID_HELPERS = Path("/usr/lib/squid")


@contextlib.contextmanager
def _world_dir(prefix: str) -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o777)  # the proxy's own user writes its logs here
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def squid_conf(
    directory: Path,
    port: int,
    *,
    users: Path | None = None,
    deny_port: int | None = None,
    tls_cert: Path | None = None,
) -> str:
    listen = f"https_port 127.0.0.1:{port} tls-cert={tls_cert}" if tls_cert else ""
    lines = [
        listen or f"http_port 127.0.0.1:{port}",
        f"pid_filename {directory}/squid.pid",
        f"cache_log {directory}/cache.log",
        f"access_log stdio:{directory}/access.log",
        f"coredump_dir {directory}",
        "cache deny all",
        "cache_mem 8 MB",
        "pinger_enable off",  # no ICMP probes to anyone
        "visible_hostname promptpath-lab",
        "dns_nameservers 127.0.0.1",  # /etc/hosts first; never a resolver off this host
        "shutdown_lifetime 0 seconds",
        "acl localnet src 127.0.0.0/8",
        "acl CONNECT method CONNECT",
    ]
    if deny_port is not None:
        lines += [f"acl denied_port port {deny_port}", "http_access deny CONNECT denied_port"]
    if users is not None:
        lines += [
            f"auth_param basic program {SQUID_HELPERS}/basic_ncsa_auth {users}",
            "auth_param basic realm promptpath-lab",
            "acl authed proxy_auth REQUIRED",
            "http_access allow localnet authed",
        ]
    else:
        lines.append("http_access allow localnet")
    lines.append("http_access deny all")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def squid(
    *, user: tuple[str, str] | None = None, deny_port: int | None = None, tls: bool = False
) -> Iterator[Proxy]:
    """squid as a forward proxy; ``user`` requires Basic auth, ``deny_port`` an ACL, ``tls``
    makes it an https:// proxy (a certificate from a test CA: ``Proxy.ca``)."""
    binary = require_binary("squid")
    with _world_dir("promptpath-squid-") as directory:
        ca_file: str | None = None
        cert_file: Path | None = None
        if tls:
            import trustme

            authority = trustme.CA()
            cert_file = directory / "proxy.pem"
            authority.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
                str(cert_file)
            )
            cert_file.chmod(0o644)
            ca_file = str(directory / "proxy-ca.pem")
            authority.cert_pem.write_to_path(ca_file)
        users = None
        if user is not None:
            hashed = subprocess.run(
                ["openssl", "passwd", "-apr1", user[1]],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            users = directory / "users"
            users.write_text(f"{user[0]}:{hashed}\n")
            users.chmod(0o644)
        port = free_port()
        conf = directory / "squid.conf"
        conf.write_text(
            squid_conf(directory, port, users=users, deny_port=deny_port, tls_cert=cert_file)
        )
        args = [binary, "-N", "-f", str(conf)]
        scheme = "https" if tls else "http"
        with _running("squid", args, port, directory, scheme=scheme, ca=ca_file) as proxy:
            yield proxy


@contextlib.contextmanager
def tinyproxy() -> Iterator[Proxy]:
    """tinyproxy as a forward proxy for loopback clients (CONNECT to any port)."""
    binary = require_binary("tinyproxy")
    with _world_dir("promptpath-tinyproxy-") as directory:
        port = free_port()
        conf = directory / "tinyproxy.conf"
        conf.write_text(
            f"Port {port}\nListen 127.0.0.1\nTimeout 60\nAllow 127.0.0.1\nMaxClients 20\n"
            f'LogLevel Info\nLogFile "{directory}/tinyproxy.log"\n'
        )
        with _running("tinyproxy", [binary, "-d", "-c", str(conf)], port, directory) as proxy:
            yield proxy

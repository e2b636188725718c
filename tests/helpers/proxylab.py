"""Real reverse proxies on loopback for lab tests: nginx, haproxy and caddy.

Each proxy gets its own config, pid, logs and state in a temp dir, runs in the
foreground on a free 127.0.0.1 port, and is ready once that port accepts a connection.
Use them as context managers so a failing test still stops them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.helpers import ports

LOOPBACK = "127.0.0.1"
#: How long a started proxy may take to accept. Not a bound on anything measured (it is
#: polled every 50 ms): mitmdump, a Python program, took over 10 s at load ~8 (observed,
#: two test_ghost_stream runs in one session).
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Proxy:
    """A running proxy in front of an upstream on loopback."""

    name: str
    url: str  # scheme://127.0.0.1:PORT (no path)
    port: int
    directory: Path
    ca: str | None = None  # CA file for a TLS listener (caddy `tls internal`)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def path(self, path: str) -> str:
        return self.url + path

    def logs(self) -> str:
        """Everything the proxy wrote to its logs so far (for assertion messages)."""
        parts = []
        for log in sorted(self.directory.glob("*.log")):
            with contextlib.suppress(OSError):
                parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (tests/helpers/ports.py says why not port 0)."""
    return ports.free_port()


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        try:
            sock.connect((LOOPBACK, port))
        except OSError:
            return False
        return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def _running(
    name: str,
    args: Sequence[str],
    port: int,
    directory: Path,
    *,
    scheme: str = "http",
    ca: str | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Proxy]:
    """Start ``args``, wait until ``port`` accepts, yield, and stop the process."""
    stdout = (directory / f"{name}.stdout.log").open("wb")
    process = subprocess.Popen(
        list(args),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        cwd=directory,
        env=env,
    )
    stdout.close()
    proxy = Proxy(
        name=name,
        url=f"{scheme}://{LOOPBACK}:{port}",
        port=port,
        directory=directory,
        ca=ca,
        process=process,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _accepts(port):
            if process.poll() is not None:
                pytest.fail(f"{name} exited with status {process.returncode}\n{proxy.logs()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{name} did not accept on port {port} within {READY_TIMEOUT_S:g} s")
            time.sleep(0.05)
        yield proxy
    finally:
        _stop(process)


# -- nginx -----------------------------------------------------------------------------


def nginx_conf(
    directory: Path, port: int, upstream_port: int, location: str, http: str, listen: str = ""
) -> str:
    """A minimal nginx.conf whose every writable path is inside ``directory``; ``listen``
    adds parameters to the listen directive (``http2``: h2c by prior knowledge)."""
    d = directory
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must reach the temp dir
    return f"""{user}worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/client_body_temp;
    proxy_temp_path {d}/proxy_temp;
    fastcgi_temp_path {d}/fastcgi_temp;
    uwsgi_temp_path {d}/uwsgi_temp;
    scgi_temp_path {d}/scgi_temp;
    {http}
    server {{
        listen {LOOPBACK}:{port}{" " + listen if listen else ""};
        location / {{
            proxy_pass http://{LOOPBACK}:{upstream_port};
            {location}
        }}
    }}
}}
"""


@contextlib.contextmanager
def nginx(
    upstream_port: int, tmp_path: Path, *, location: str = "", http: str = "", listen: str = ""
) -> Iterator[Proxy]:
    """nginx reverse-proxying to 127.0.0.1:upstream_port; ``location``/``http`` add directives."""
    binary = require_binary("nginx")
    directory = tmp_path / f"nginx-{time.monotonic_ns()}"
    directory.mkdir(parents=True)
    port = free_port()
    conf = directory / "nginx.conf"
    conf.write_text(nginx_conf(directory, port, upstream_port, location, http, listen))
    args = [binary, "-p", str(directory), "-c", str(conf), "-g", "daemon off;"]
    with _running("nginx", args, port, directory) as proxy:
        yield proxy


# -- haproxy ---------------------------------------------------------------------------


def haproxy_cfg(port: int, upstream_port: int, defaults: str, bind: str = "") -> str:
    return f"""global
    maxconn 256

defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    {defaults}

frontend fe
    bind {LOOPBACK}:{port}{" " + bind if bind else ""}
    default_backend be

backend be
    server upstream {LOOPBACK}:{upstream_port}
"""


@contextlib.contextmanager
def haproxy(
    upstream_port: int, tmp_path: Path, *, defaults: str = "", bind: str = ""
) -> Iterator[Proxy]:
    """haproxy (HTTP mode) in front of 127.0.0.1:upstream_port; ``defaults`` adds lines,
    ``bind`` parameters to the frontend's bind (``proto h2``: h2c by prior knowledge)."""
    binary = require_binary("haproxy")
    directory = tmp_path / f"haproxy-{time.monotonic_ns()}"
    directory.mkdir(parents=True)
    port = free_port()
    cfg = directory / "haproxy.cfg"
    cfg.write_text(haproxy_cfg(port, upstream_port, defaults.replace("\n", "\n    "), bind))
    with _running("haproxy", [binary, "-f", str(cfg), "-db"], port, directory) as proxy:
        yield proxy


# -- caddy -----------------------------------------------------------------------------

# Observed with caddy 2.6.2 (Go 1.19) and an HTTP/1.1 client, 1 canary probe in 120 idle and
# 6 in 150 beside two busy loops: the stream ends cleanly after 0 or 1 token, and caddy logs
# "reading from backend: ... use of closed network connection" then "aborting with
# incomplete response"; a capture shows caddy's FIN to the upstream 0.3 ms after the
# upstream's first token. Go's transport flushes the request headers, copies the body to
# the upstream, then reads the client's body once more to check its length. When the
# upstream answers first (the canary's first token is immediate), writing the response
# headers makes Go's HTTP/1 server drain and close that body, the extra read fails, and
# the transport closes the upstream connection (golang/go#40747). With buffer_requests
# caddy reads the body into its own buffer before proxying, the extra read hits that
# buffer, and 0 in 140 failed under the same load; the response path under test is
# unchanged. (caddy >= 2.7 spells it `request_buffers unlimited`.)
REVERSE_PROXY_OPTIONS = "buffer_requests"


def caddyfile(directory: Path, port: int, upstream_port: int, site: str, *, tls: bool) -> str:
    address = f"https://localhost:{port}" if tls else f"http://{LOOPBACK}:{port}"
    bind = f"bind {LOOPBACK}\n    tls internal\n    " if tls else f"bind {LOOPBACK}\n    "
    return f"""{{
    admin off
    skip_install_trust
    storage file_system {{
        root {directory}/storage
    }}
    auto_https disable_redirects
    http_port {free_port() if tls else port}
    https_port {port if tls else free_port()}
    log {{
        output file {directory}/caddy.log
    }}
}}

{address} {{
    {bind}reverse_proxy {LOOPBACK}:{upstream_port} {{
        {REVERSE_PROXY_OPTIONS}
    }}
    {site}
}}
"""


def serves_tls(port: int, ca: str, server_name: str) -> bool:
    """Whether a TLS handshake to 127.0.0.1:port for ``server_name`` verifies against ``ca``
    now (a missing CA file counts as no)."""
    try:
        context = ssl.create_default_context(cafile=ca)
        with (
            socket.create_connection((LOOPBACK, port), timeout=2) as sock,
            context.wrap_socket(sock, server_hostname=server_name),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


def wait_for_tls(port: int, ca: str, server_name: str, process: subprocess.Popen[bytes]) -> None:
    """Until ``port`` completes a verified handshake: caddy listens before its ``tls
    internal`` certificate is in its cache. Checked by hand (caddy 2.6.2, handshakes in a
    loop from the start): in 3 of 20 starts the first 1-4 handshakes, within 5 ms of the
    port accepting, got alert internal_error, then every one completed; a lab test once
    hit that window (flake_suite.py, load ~10)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not serves_tls(port, ca, server_name):
        if process.poll() is not None:
            pytest.fail(f"exited with status {process.returncode} before serving TLS")
        if time.monotonic() > deadline:
            pytest.fail(f"no verified TLS handshake on port {port} within {READY_TIMEOUT_S:g} s")
        time.sleep(0.05)


@contextlib.contextmanager
def caddy(
    upstream_port: int, tmp_path: Path, *, site: str = "", tls: bool = False
) -> Iterator[Proxy]:
    """caddy ``reverse_proxy`` to 127.0.0.1:upstream_port (``tls internal`` when ``tls``)."""
    binary = require_binary("caddy")
    directory = tmp_path / f"caddy-{time.monotonic_ns()}"
    directory.mkdir(parents=True)
    port = free_port()
    path = directory / "Caddyfile"
    path.write_text(caddyfile(directory, port, upstream_port, site, tls=tls))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(directory),
        "XDG_DATA_HOME": str(directory / "data"),
        "XDG_CONFIG_HOME": str(directory / "config"),
    }
    args = [binary, "run", "--config", str(path), "--adapter", "caddyfile"]
    ca = str(directory / "storage/pki/authorities/local/root.crt") if tls else None
    with _running(
        "caddy", args, port, directory, scheme="https" if tls else "http", ca=ca, env=env
    ) as proxy:
        if tls:
            assert ca is not None and proxy.process is not None
            wait_for_tls(port, ca, "localhost", proxy.process)
            url = f"https://localhost:{port}"
            proxy = Proxy(
                name=proxy.name,
                url=url,
                port=port,
                directory=directory,
                ca=ca,
                process=proxy.process,
            )
        yield proxy

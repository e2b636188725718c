"""Real DNS servers on loopback for lab tests: nsd (authoritative), unbound and dnsmasq (caches).

Each server gets its own config, pid, log and state files in a temp dir, runs in the
foreground on a free 127.0.0.1 port, and is ready only once it has answered a query.
Use them as context managers so a failing test still kills them.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import dns.exception
import dns.message
import dns.query
import dns.rcode

from tests.conftest import require_binary
from tests.helpers import ports

LOOPBACK = "127.0.0.1"
READY_TIMEOUT_S = 8.0


def free_port() -> int:
    """A port that is free for both UDP and TCP on 127.0.0.1 right now."""
    return ports.free_port(udp=True)


def ask(port: int, qname: str, rdtype: str = "A", *, timeout: float = 0.5) -> dns.message.Message:
    """One recursive-flagged UDP query to 127.0.0.1:port (for readiness checks and test setup)."""
    query = dns.message.make_query(qname, rdtype, use_edns=0)
    return dns.query.udp(query, LOOPBACK, timeout=timeout, port=port)


def zone_text(origin: str, *, serial: int, ttl: int, records: Sequence[str]) -> str:
    """A zone file: SOA (negative TTL = ttl), one NS in-zone, and the given records."""
    origin = origin.rstrip(".") + "."
    lines = [
        f"$ORIGIN {origin}",
        f"$TTL {ttl}",
        f"@ IN SOA ns1.{origin} hostmaster.{origin} {serial} 3600 600 86400 {ttl}",
        f"@ IN NS ns1.{origin}",
        f"ns1 IN A {LOOPBACK}",
        *records,
    ]
    return "\n".join(lines) + "\n"


class LabServer:
    """A foreground server process on a loopback port; subclasses write its config."""

    binary_name = ""

    def __init__(self, workdir: Path, *, probe_name: str) -> None:
        self.binary = require_binary(self.binary_name)
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.probe_name = probe_name
        self.log = workdir / f"{self.binary_name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    # -- subclass hooks ------------------------------------------------------------------
    def command(self) -> list[str]:
        raise NotImplementedError

    def write_config(self) -> None:
        return None

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> LabServer:
        self.write_config()
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        out.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.binary_name} exited with {self.proc.returncode}:\n{self.log_text()}"
                )
            try:
                reply = ask(self.port, self.probe_name, "A", timeout=0.3)
            except (dns.exception.Timeout, OSError):
                time.sleep(0.05)
                continue
            if reply.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN, dns.rcode.SERVFAIL):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"{self.binary_name} on port {self.port} did not answer within "
            f"{READY_TIMEOUT_S} s:\n{self.log_text()}"
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def log_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-4000:]
        return ""

    def __enter__(self) -> LabServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class NSD(LabServer):
    """nsd serving one zone from a file in workdir; ``publish`` rewrites it and restarts."""

    binary_name = "nsd"

    def __init__(self, workdir: Path, *, zone: str, ttl: int, records: Sequence[str]) -> None:
        self.zone = zone.rstrip(".") + "."
        super().__init__(workdir, probe_name=self.zone)
        self.ttl = ttl
        self.records = list(records)
        self.serial = 1

    def write_config(self) -> None:
        (self.workdir / "zone.db").write_text(
            zone_text(self.zone, serial=self.serial, ttl=self.ttl, records=self.records)
        )
        wd = self.workdir
        (wd / "nsd.conf").write_text(
            f"""server:
    ip-address: {LOOPBACK}@{self.port}
    port: {self.port}
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "{wd}"
    database: ""
    zonelistfile: "{wd}/zone.list"
    pidfile: "{wd}/nsd.pid"
    xfrdfile: "{wd}/xfrd.state"
    xfrdir: "{wd}"
    logfile: "{wd}/nsd.log"
    server-count: 1
    reuseport: no
    verbosity: 1
remote-control:
    control-enable: no
zone:
    name: "{self.zone}"
    zonefile: "{wd}/zone.db"
"""
        )

    def command(self) -> list[str]:
        return [self.binary, "-d", "-c", str(self.workdir / "nsd.conf")]

    def publish(self, records: Sequence[str]) -> None:
        """Change the zone (serial + 1) and restart on the same port."""
        self.stop()
        self.records = list(records)
        self.serial += 1
        self.start()


class Unbound(LabServer):
    """unbound as a recursive cache whose only upstream is a stub zone on loopback."""

    binary_name = "unbound"

    def __init__(
        self,
        workdir: Path,
        *,
        zone: str,
        upstream_port: int,
        serve_expired: bool = False,
        allow_snoop: bool = False,
        extra: Sequence[str] = (),
    ) -> None:
        self.zone = zone.rstrip(".") + "."
        # unbound answers localhost itself: ready even when its upstream is dead.
        super().__init__(workdir, probe_name="localhost.")
        self.upstream_port = upstream_port
        self.serve_expired = serve_expired
        # allow_snoop: RD=0 queries are answered from the cache (aa: false), not REFUSED.
        self.access = "allow_snoop" if allow_snoop else "allow"
        self.extra = list(extra)

    def write_config(self) -> None:
        wd = self.workdir
        stale = (
            [
                "serve-expired: yes",
                "serve-expired-ttl: 0",
                "serve-expired-reply-ttl: 30",
                # 0: answer from the expired cache at once, refresh in the background.
                "serve-expired-client-timeout: 0",
                "ede: yes",
                "ede-serve-expired: yes",
            ]
            if self.serve_expired
            else []
        )
        server = [
            f"interface: {LOOPBACK}@{self.port}",
            f"port: {self.port}",
            "do-ip6: no",
            'chroot: ""',
            'username: ""',
            f'directory: "{wd}"',
            f'pidfile: "{wd}/unbound.pid"',
            f'logfile: "{wd}/unbound.log"',
            "use-syslog: no",
            "verbosity: 1",
            "num-threads: 1",
            "so-reuseport: no",
            'module-config: "iterator"',
            "do-not-query-localhost: no",
            f"access-control: 127.0.0.0/8 {self.access}",
            "infra-host-ttl: 1",
            "infra-cache-min-rtt: 50",
            *stale,
            *self.extra,
        ]
        body = "server:\n" + "".join(f"    {line}\n" for line in server)
        body += "remote-control:\n    control-enable: no\n"
        body += (
            f'stub-zone:\n    name: "{self.zone}"\n    stub-addr: {LOOPBACK}@{self.upstream_port}\n'
        )
        (wd / "unbound.conf").write_text(body)

    def command(self) -> list[str]:
        return [self.binary, "-d", "-c", str(self.workdir / "unbound.conf")]


class Dnsmasq(LabServer):
    """dnsmasq forwarding one zone to a loopback authoritative (a TTL floor, or serve-stale),
    or serving local data only (``host_records`` with ``local_ttl``, no upstream at all)."""

    binary_name = "dnsmasq"

    def __init__(
        self,
        workdir: Path,
        *,
        zone: str,
        upstream_port: int | None,
        min_cache_ttl: int = 0,
        use_stale_cache: bool = False,
        host_records: Sequence[tuple[str, str]] = (),
        local_ttl: int | None = None,
    ) -> None:
        self.zone = zone.rstrip(".")
        # Without an upstream the zone's apex is REFUSED: be ready once local data answers.
        probe = host_records[0][0] if upstream_port is None and host_records else self.zone
        super().__init__(workdir, probe_name=probe.rstrip(".") + ".")
        self.upstream_port = upstream_port
        self.min_cache_ttl = min_cache_ttl
        self.use_stale_cache = use_stale_cache
        self.host_records = list(host_records)
        self.local_ttl = local_ttl

    def command(self) -> list[str]:
        wd = self.workdir
        cmd = [
            self.binary,
            "--no-daemon",
            "--conf-file=/dev/null",
            f"--port={self.port}",
            f"--listen-address={LOOPBACK}",
            "--bind-interfaces",
            "--no-resolv",
            "--no-hosts",
            "--no-poll",
            f"--pid-file={wd}/dnsmasq.pid",
            "--cache-size=1000",
            "--user=root",
            "--log-facility=-",
        ]
        if self.upstream_port is not None:
            cmd.append(f"--server=/{self.zone}/{LOOPBACK}#{self.upstream_port}")
        # Local data: answered with local-ttl (default 0) every time, no countdown.
        cmd += [f"--host-record={name},{ip}" for name, ip in self.host_records]
        if self.local_ttl is not None:
            cmd.append(f"--local-ttl={self.local_ttl}")
        if self.min_cache_ttl:
            cmd.append(f"--min-cache-ttl={self.min_cache_ttl}")
        if self.use_stale_cache:
            # Expired entries are answered with TTL 0 while dnsmasq refreshes in the background.
            cmd.append("--use-stale-cache")
        return cmd

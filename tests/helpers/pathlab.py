"""A routed path of network namespaces, for the path probe's tests:

    client ── r1 ── r2 ══ r3 ── server
    10.203.1.1   .1.2|.2.1  .2.2|.3.1  .3.2|.4.1  .4.2

Each box is a namespace this helper makes (``pp-path-<pid>-<hex>-<name>``); r1..r3 forward
(``net.ipv4.ip_forward=1``); the addresses exist only inside them, so nothing reaches the
host's own network. The r2 ══ r3 link is a veth pair, or with ``delay_ms`` a TUN link
pumped by the impairer (``tests/helpers/impairer.py``: this kernel has no netem), so a
delay sits on that one link. ``mtu`` sets that link's MTU (a path-MTU black hole when r3's
ICMP "fragmentation needed" is then dropped with ``nft`` in r3).

Every namespace is removed when the block ends, and at exit if the process dies otherwise;
so is the ``/etc/netns/<namespace>/`` directory ``PathLab.resolv_conf`` makes (iproute2
bind-mounts its files over ``/etc`` for commands run with ``ip netns exec``: the way to give
one namespace a resolver of its own without touching the host's).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import secrets
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import impairer


def chain(routers: int) -> tuple[tuple[str, ...], tuple[tuple[str, str, int], ...]]:
    """The boxes (client, r1..rN, server) and each link between neighbours, numbered from 1:
    link k joins box k-1 and box k."""
    names = ("client", *(f"r{i}" for i in range(1, routers + 1)), "server")
    return names, tuple((names[k - 1], names[k], k) for k in range(1, len(names)))


NAMES, LINKS = chain(3)
#: Each link's /30: the left end takes .1, the right end .2.


def addr(link: int, end: int) -> str:
    return f"10.203.{link}.{end}"


CLIENT = addr(1, 1)
SERVER = addr(4, 2)
#: What a traceroute from the client sees at each TTL: the address each router answers
#: from is the one on the link the probe came in on.
HOPS = (addr(1, 2), addr(2, 2), addr(3, 2), SERVER)
NETNS_ETC = Path("/etc/netns")


class LabUnavailable(RuntimeError):
    """Not root, or no iproute2 / network namespaces here."""


def _run(*args: str) -> None:
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip()}")


def check_available() -> None:
    if os.geteuid() != 0:
        raise LabUnavailable("the path lab needs root (network namespaces)")
    if shutil.which("ip") is None:
        raise LabUnavailable("iproute2 (ip) is not installed")


@dataclass(slots=True)
class PathLab:
    tag: str
    namespaces: dict[str, str] = field(default_factory=dict)

    def ns(self, name: str) -> str:
        return self.namespaces[name]

    def exec(self, name: str, *args: str) -> list[str]:
        """The command that runs ``args`` inside namespace ``name``."""
        return ["ip", "netns", "exec", self.ns(name), *args]

    def sysctl(self, name: str, key: str, value: str) -> None:
        _run(*self.exec(name, "sysctl", "-q", "-w", f"{key}={value}"))

    def resolv_conf(self, name: str, nameserver: str) -> None:
        """Commands run in namespace ``name`` see ``nameserver`` as the system resolver (an
        address inside that namespace: its own loopback)."""
        directory = NETNS_ETC / self.ns(name)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "resolv.conf").write_text(f"nameserver {nameserver}\n")

    def nft(self, name: str, script: str) -> None:
        """Load an nftables ruleset into namespace ``name`` (``nft -f -``)."""
        result = subprocess.run(
            self.exec(name, "nft", "-f", "-"), input=script, capture_output=True, text=True
        )
        if result.returncode != 0:
            raise RuntimeError(f"nft in {name}: {result.stderr.strip()}")


@contextlib.contextmanager
def path_lab(
    *, delay_ms: float = 0.0, mtu: int | None = None, routers: int = 3
) -> Iterator[PathLab]:
    """Build the chain; ``delay_ms`` one way on r2 -> r3 and back (so the RTT grows by
    twice it from r3 on); ``mtu`` on the r2 ══ r3 link. With ``routers`` other than 3 the
    server is at ``addr(routers + 1, 2)`` (``server_of``), a TTL of ``routers + 1`` away."""
    if routers < 3:
        raise ValueError("the chain has at least r1, r2 and r3 (the impaired link is r2 ══ r3)")
    names, links = chain(routers)
    check_available()
    lab = PathLab(tag=f"{os.getpid()}-{secrets.token_hex(2)}")
    fds: list[int] = []
    stop_r, stop_w = os.pipe()
    pump: threading.Thread | None = None

    def remove() -> None:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        fds.clear()
        for namespace in lab.namespaces.values():
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
            shutil.rmtree(NETNS_ETC / namespace, ignore_errors=True)
        with contextlib.suppress(OSError):  # only when no other lab's directory is left
            NETNS_ETC.rmdir()
        lab.namespaces.clear()

    atexit.register(remove)
    try:
        for name in names:
            namespace = f"pp-path-{lab.tag}-{name}"
            _run("ip", "netns", "add", namespace)
            lab.namespaces[name] = namespace
            _run("ip", "-n", namespace, "link", "set", "lo", "up")
        for left, right, link in links:
            a, b = f"{left}-{link}"[:15], f"{right}-{link}"[:15]
            if link == 3 and delay_ms > 0:
                for name, local, peer in ((left, 1, 2), (right, 2, 1)):
                    fds.append(impairer._open_tun_in(lab.ns(name)))
                    dev = impairer.TUN_NAME
                    _run(
                        "ip",
                        "-n",
                        lab.ns(name),
                        "addr",
                        "add",
                        addr(link, local),
                        "peer",
                        addr(link, peer),
                        "dev",
                        dev,
                    )
                    if mtu is not None:
                        _run("ip", "-n", lab.ns(name), "link", "set", dev, "mtu", str(mtu))
                    _run("ip", "-n", lab.ns(name), "link", "set", dev, "up")
                continue
            _run(
                "ip",
                "link",
                "add",
                a,
                "netns",
                lab.ns(left),
                "type",
                "veth",
                "peer",
                "name",
                b,
                "netns",
                lab.ns(right),
            )
            for name, dev, end in ((left, a, 1), (right, b, 2)):
                _run("ip", "-n", lab.ns(name), "addr", "add", f"{addr(link, end)}/30", "dev", dev)
                if mtu is not None and link == 3:
                    _run("ip", "-n", lab.ns(name), "link", "set", dev, "mtu", str(mtu))
                _run("ip", "-n", lab.ns(name), "link", "set", dev, "up")
        forwarding = names[1:-1]
        for router in forwarding:
            lab.sysctl(router, "net.ipv4.ip_forward", "1")
        # Toward the server: each box's next hop to the right (the last router is on the
        # server's link); back: to the left.
        for k, name in enumerate(names[:-2], 1):
            _run("ip", "-n", lab.ns(name), "route", "add", "default", "via", addr(k, 2))
        last = len(links)
        _run("ip", "-n", lab.ns("server"), "route", "add", "default", "via", addr(last, 1))
        for link, name in enumerate(forwarding[1:], 2):
            for subnet in range(1, link):
                _run(
                    "ip",
                    "-n",
                    lab.ns(name),
                    "route",
                    "add",
                    f"10.203.{subnet}.0/30",
                    "via",
                    addr(link, 1),
                )
        if fds:
            one = impairer.Impairment(delay_ms=delay_ms)
            directions = (
                impairer.Direction(one, random.Random("path/up")),
                impairer.Direction(one, random.Random("path/down")),
            )
            pump = threading.Thread(
                target=impairer._pump,
                args=((fds[0], fds[1]), directions, stop_r),
                name="pathlab-impairer",
                daemon=True,
            )
            pump.start()
        yield lab
    finally:
        os.write(stop_w, b"x")
        if pump is not None:
            pump.join(5)
        os.close(stop_r)
        os.close(stop_w)
        remove()
        atexit.unregister(remove)


def server_of(routers: int) -> str:
    """The server's address in a chain of ``routers`` routers."""
    return addr(routers + 1, 2)


def big_certificate(directory: str, *, names: int = 150) -> tuple[str, str, str]:
    """A CA and a localhost leaf carrying ``names`` extra DNS names (~20 bytes each), so the
    server's TLS flight spans several full-size segments: (ca.pem, chain.pem, key.pem)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pathlab CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName("localhost")] + [
        x509.DNSName(f"name-{i:04d}.pathlab.invalid") for i in range(names)
    ]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = tuple(os.path.join(directory, n) for n in ("ca.pem", "chain.pem", "key.pem"))
    with open(paths[0], "wb") as f:
        f.write(ca.public_bytes(pem))
    with open(paths[1], "wb") as f:
        f.write(leaf.public_bytes(pem) + ca.public_bytes(pem))
    with open(paths[2], "wb") as f:
        f.write(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
    return paths[0], paths[1], paths[2]

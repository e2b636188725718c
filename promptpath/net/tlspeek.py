"""One TLS handshake that only looks: the highest version the server agrees to (down to
TLS 1.0) and the certificate chain exactly as it sent it. No request follows.

Python's ``ssl`` shows neither: its contexts refuse anything below TLS 1.2 before the
server can say what it speaks, and before 3.13 it hands out only the leaf (or the chain
it built itself, which hides a missing intermediate it found elsewhere). pyOpenSSL (a
dependency already, for HTTP/3 certificate checks) exposes ``SSL_get_peer_cert_chain``.
Blocking, so callers run it in a worker thread; every wait is bounded by ``timeout``.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import time
from dataclasses import dataclass, field

from promptpath.net import flows


@dataclass(frozen=True, slots=True, kw_only=True)
class Peek:
    """What a looking-only handshake learned."""

    version: str | None = None  # "TLSv1.3", "TLSv1.1", ... (None: no handshake)
    chain: tuple[bytes, ...] = field(default=(), repr=False)  # DER, as sent, leaf first
    error: str | None = None  # why there was no handshake


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def peek_tls(ip: str, port: int, server_name: str, *, timeout: float) -> Peek:
    """Handshake with ``ip``:``port`` sending SNI ``server_name`` (none for an IP literal),
    accepting any certificate and any version from TLS 1.0 up."""
    from OpenSSL import SSL

    deadline = time.monotonic() + timeout
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    context.set_min_proto_version(SSL.TLS1_VERSION)
    # Security level 0: OpenSSL 3 refuses TLS 1.0/1.1 at its default level, and the point
    # is to learn whether the server offers only those.
    context.set_cipher_list(b"DEFAULT@SECLEVEL=0")
    context.set_verify(SSL.VERIFY_NONE, lambda *_args: True)
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            sock.connect((ip, port))
        except OSError as exc:
            flows.note_endpoints(flows.TCP, None, (ip, port))
            return Peek(error=f"no TCP connection to {ip}:{port} ({exc.strerror or exc})")
        flows.note_socket(sock, flows.TCP)
        sock.setblocking(False)
        conn = SSL.Connection(context, sock)
        if not _is_ip(server_name):
            conn.set_tlsext_host_name(server_name.encode("idna"))
        conn.set_connect_state()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Peek(error=f"no TLS handshake with {ip}:{port} within {timeout:g} s")
            try:
                conn.do_handshake()
                break
            except SSL.WantReadError:
                select.select([sock], [], [], remaining)
            except SSL.WantWriteError:
                select.select([], [sock], [], remaining)
            except SSL.Error as exc:
                return Peek(error=f"TLS handshake with {ip}:{port} failed ({exc})")
            except OSError as exc:  # a reset or close mid-handshake
                return Peek(error=f"TLS handshake with {ip}:{port} failed ({exc})")
        chain = conn.get_peer_cert_chain(as_cryptography=True) or []
        from cryptography.hazmat.primitives.serialization import Encoding

        return Peek(
            version=conn.get_protocol_version_name(),
            chain=tuple(cert.public_bytes(Encoding.DER) for cert in chain),
        )
    finally:
        sock.close()

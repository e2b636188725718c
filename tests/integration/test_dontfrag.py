"""Don't-fragment on real UDP sockets (net/dontfrag.py), read back from the kernel, and on
the reference endpoint's QUIC socket. What DF does to datagrams on a narrow path is shown
in the namespace lab (tests/lab/test_path_mtu.py); here, that the options are set."""

from __future__ import annotations

import socket

import pytest

from promptpath.net import dontfrag
from promptpath.server.hosting import _bind

pytestmark = pytest.mark.skipif(not dontfrag._LINUX, reason="Linux socket options")


@pytest.mark.parametrize(("mode", "value"), [("do", 2), ("probe", 3)])
def test_ipv4_sockets_get_df_in_the_mode_asked(mode: dontfrag.Mode, value: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        # Linux's default (net.ipv4.ip_no_pmtu_disc=0) is IP_PMTUDISC_WANT: DF until the
        # kernel learns a smaller path MTU, then fragments. Not forbidden.
        assert not dontfrag.fragmentation_forbidden(sock)
        assert dontfrag.forbid_fragmentation(sock, mode)
        assert sock.getsockopt(socket.IPPROTO_IP, dontfrag.IP_MTU_DISCOVER) == value
        assert dontfrag.fragmentation_forbidden(sock)


def test_ipv6_sockets_get_both_options() -> None:
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    except OSError:
        pytest.skip("no IPv6 here")
    with sock:
        assert dontfrag.forbid_fragmentation(sock, "do")
        assert sock.getsockopt(socket.IPPROTO_IPV6, dontfrag.IPV6_MTU_DISCOVER) == 2
        assert dontfrag.IPV6_DONTFRAG is not None
        assert sock.getsockopt(socket.IPPROTO_IPV6, dontfrag.IPV6_DONTFRAG) == 1


def test_the_path_mtu_of_a_connected_socket_is_the_routes() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        assert dontfrag.path_mtu(sock) is None  # not connected: no route yet
        sock.connect(("127.0.0.1", 9))  # sends nothing
        # The device's MTU, capped at IPv4's largest packet (checked: lo's 65536 reads 65535).
        with open("/sys/class/net/lo/mtu") as fh:
            assert dontfrag.path_mtu(sock) == min(int(fh.read()), 65535)


def test_the_reference_endpoints_quic_socket_never_fragments() -> None:
    tcp, udp = _bind("127.0.0.1", 0, udp=True)
    try:
        assert udp is not None
        assert dontfrag.fragmentation_forbidden(udp)
    finally:
        tcp.close()
        if udp is not None:
            udp.close()

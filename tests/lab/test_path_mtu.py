"""HTTP/3 over a path narrower than QUIC's 1200-byte datagrams, in namespaces this test makes
(tests/helpers/pathlab.py) with an 1100-byte r2 ══ r3 link:

    client ── r1 ── r2 ══ r3 ── server (promptpath serve, HTTP/1.1, 2 and 3)

Observed by hand first, on this kernel (6.18), and relied on here:
* a UDP socket with Linux's default (IP_PMTUDISC_WANT) sends its first 1200-byte datagram
  with DF; r2 answers ICMP "fragmentation needed" (MTU 1100), which reaches the socket's
  error queue (errno EMSGSIZE, origin ICMP, type 3 code 4, ee_info 1100, offender
  10.203.2.2) and teaches the client's kernel the path MTU (``ip route get`` then shows
  ``cache expires 597sec mtu 1100``); every later datagram leaves as a 1114-byte and a
  162-byte fragment (tshark in the server namespace), is reassembled and answered: the
  server's version negotiation comes back;
* with IP_PMTUDISC_DO the second datagram fails in send() itself with EMSGSIZE (error
  queue: origin local, ee_info 1100) and nothing reaches the server; with
  IP_PMTUDISC_PROBE every datagram leaves with DF and draws r2's ICMP again;
* before the fix, ``promptpath run --http 3`` here failed with "Message too long — nothing
  answers on UDP port 8443 (no HTTP/3 there, or an ICMP reject)", and a second run
  completed over fragments, its path probe saying "1200-byte UDP datagrams reach
  10.203.4.2 port 8443 and it answers QUIC: HTTP/3's Initials get through".
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import pathlab
from tests.helpers.pathlab import HOPS, SERVER, PathLab
from tests.lab.test_path_probe import PORT, _command, _need_lab, _serving

pytestmark = [pytest.mark.lab, pytest.mark.path]

LINK_MTU = 1100


@pytest.fixture
def narrower(tmp_path: Path) -> Iterator[PathLab]:
    """The chain with an 1100-byte r2 ══ r3 link, every router's ICMP unlimited."""
    _need_lab()
    with pathlab.path_lab(mtu=LINK_MTU) as built:
        for name in ("r1", "r2", "r3", "server"):
            built.sysctl(name, "net.ipv4.icmp_ratelimit", "0")
        with _serving(built, "--self-signed", str(tmp_path)):
            yield built


def _run(lab: PathLab, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    """``promptpath run --http 3 --probe path --json`` from the client namespace."""
    command = _command(tmp_path, "--json", http="3")
    result = subprocess.run(
        lab.exec("client", *command), capture_output=True, text=True, timeout=60
    )
    return result.returncode, json.loads(result.stdout)


#: From the client namespace: one 1200-byte probe datagram with the kernel's default
#: (fragmenting once the path MTU is known), printing the bytes of the answer.
_FRAGMENTING_SEND = """
import socket, sys
from promptpath.net.pathtrace import quic_probe_datagram
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2.0)
s.connect((sys.argv[1], int(sys.argv[2])))
s.send(quic_probe_datagram())
print(len(s.recv(2048)))
"""


def test_quic_never_rides_fragments_and_the_narrow_hop_is_named(
    narrower: PathLab, tmp_path: Path
) -> None:
    # Twice: the first run meets r2's ICMP; the second finds the path MTU already in the
    # client's kernel, where a socket that fragments gets through.
    for attempt in ("first", "second"):
        status, body = _run(narrower, tmp_path)
        error = body["error"]
        assert status == 4, (attempt, error)
        assert (error["stage"], error["kind"]) == ("quic_handshake", "path_mtu"), attempt
        assert "the path MTU is below QUIC's 1200-byte datagrams" in error["message"]
        assert f"at most {LINK_MTU} bytes" in error["message"]
        assert "nothing answers on UDP" not in error["message"]
        (path,) = [f for f in body["findings"] if f["probe"] == "path"]
        udp = path["evidence"]["udp"]
        assert udp["quic_answered"] is False and udp["dont_fragment"] is True, attempt
        assert udp["path_mtu"] == {"after_hop": 2, "responder": HOPS[1], "bytes": LINK_MTU}
        assert (
            f"the path MTU is below 1200-byte UDP datagrams after hop 2 ({HOPS[1]})"
            in (path["summary"])
        )
        assert path["verdict"] == "warn"
        assert path["evidence"]["reached"] is True  # TCP to the same port goes through
    # The server is there and answers the same datagram when it is fragmented: only DF
    # keeps it out, as it keeps out real QUIC clients.
    answer = subprocess.run(
        narrower.exec("client", sys.executable, "-c", _FRAGMENTING_SEND, SERVER, str(PORT)),
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert answer.returncode == 0 and int(answer.stdout) > 0, answer.stderr

"""Real round trips: promptpath and the reference endpoint on either side of the impairer.

The endpoint runs in the server namespace, promptpath (a process, as a user runs it) in
the client namespace; every packet between them crosses tests/helpers/impairer.py, which
adds 20 ms each way (RTT 40 ms). On loopback a round trip is ~15 µs, so only here can a
test see setup cost in round trips and loss turn into retransmission stalls.

Tolerances are asymmetric: the impairer never releases a packet early, so no span that
contains a round trip can be shorter than RTT_MS; above it, a loaded 2-core machine adds
client CPU and scheduling (SLACK_MS). Each setup figure is taken over RUNS runs, so one
run that loses the CPU to a neighbour does not decide the test; a handshake's own CPU is
measured beside it with the delay off and taken out (``_assert_one_round_trip``).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import timing
from tests.helpers.impairer import (
    ImpairedPath,
    Impairment,
    impaired_path,
)
from tests.helpers.impairlab import require_impairer
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"
ONE_WAY_MS = 20.0
RTT_MS = 2 * ONE_WAY_MS
#: Observed on this 2-core machine (load ~1-2 from other sessions), single runs: connect
#: 40.3-40.5 ms, tls 41.6-45.7, quic_handshake 44.5-47.3 (today's span includes the
#: client's ClientHello build and aioquic's own work, issue 14), --compare-http setup
#: difference 36.8-39.5. All five tests passed at load averages up to ~3 (other sessions'
#: suites, and three CPU-bound loops once); at ~4 and above single runs reached 52 ms (tls)
#: and the connect-RTT median 43.7 ms. 8 ms above the RTT leaves room for a neighbour.
SLACK_MS = 8.0
#: What quic_handshake may add over TCP+TLS's spans. It used to start before the first
#: Initial (QuicConnection created, ClientHello built: 2.3-2.6 ms cold), 4-7 ms over the
#: RTT; since issue 14 it runs first Initial -> client Finished, ClientHello build apart
#: (client_hello_ms). What remains is the handshake work itself, which is heavier in
#: aioquic (Python, both ends) than in OpenSSL: over the direct path (delay off, 10 x 5
#: runs beside two CPU hogs, load 7.4-8.9) the median quic_handshake exceeded the median
#: tls by -7 to +18 ms, and the flake check saw the --compare-http saving's median at
#: 30.6 ms (bound 32) in one round of 6. A saving of no round trip would read ~0.
QUIC_CPU_MS = 12.0
#: The handshakes' own CPU (both ends, Python) is as slow as the machine and its load:
#: quic_handshake read a median 49.7 ms on a fresh CI machine at load < 1, 50-82 ms here
#: at load 7-9. Each handshake is therefore also run with the impairer's delay off, on
#: the same path at the same moment, and the round trip is the fastest delayed run minus
#: the fastest direct one (interference only ever adds time: the fastest run is the least
#: disturbed). Measured 10 times, 5 runs each, beside two CPU-bound loops (load 7.4-8.9
#: with the other sessions): quic_handshake 32.7-46.1 ms, tls 37.2-47.4 ms. Two round
#: trips would read ~80. connect (the kernel's SYN / SYN-ACK) has no CPU of ours inside
#: but the client's wake-up after it: its median of 5 read 45.4 ms at load ~7, so it is
#: judged the same way. The flake check (10 rounds, two CPU hogs, load 4.9-7.6 before
#: them) saw tls waited 38.5-49.9 ms, quic_handshake 34.6-48.8, connect 35.2-40.1: 10 ms
#: was met by 0.06 ms once, so 12.
WAIT_SLACK_MS = 12.0
#: Medians of 5: with 3, one HTTP/3 run that lost the CPU to the rest of the machine (load
#: ~4, other sessions' suites plus a busy loop) decided the --compare-http test (23.5 ms).
RUNS = 5
#: promptpath and the endpoint run at a higher priority than the machine's other work (the
#: impairer's pump is real-time): what is measured is the path and the tool, not a
#: neighbour's test suite. With two CPU-bound processes on both cores and without this,
#: connect read 49-69 ms and quic_handshake 50 ms.
PRIORITY = ("nice", "-n", "-10")
#: 2 % loss each way, seeded: a lost segment holds back every later token until its
#: retransmission, at least one round trip.
LOSS = 0.02
LOSS_TOKENS = 400
LOSS_RATE = 200


@dataclass(frozen=True, slots=True)
class Lab:
    path: ImpairedPath
    server: RefServer

    def run(self, *args: str) -> dict[str, Any]:
        """``promptpath run ... --json`` in the client namespace; its JSON (exit 0 asserted)."""
        url = f"https://localhost:{self.server.port}{CHAT}"
        assert self.server.ca is not None
        command = self.path.client(
            *PRIORITY,
            sys.executable,
            "-m",
            "promptpath",
            "run",
            url,
            "--resolve",
            f"localhost:{self.server.port}:{self.path.server_addr}",
            "--cacert",
            self.server.ca,
            "--json",
            *args,
        )
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=_env())
        assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-3000:]}"
        result: dict[str, Any] = json.loads(done.stdout)
        return result


def _env() -> dict[str, str]:
    drop = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
    return {k: v for k, v in os.environ.items() if k not in drop}


@contextlib.contextmanager
def _lab_on(impairment: Impairment, tmp: Path, *, seed: int = 0, **serve: str) -> Iterator[Lab]:
    """An impaired path (the same impairment both ways) with the endpoint behind it."""
    require_impairer()
    extra = [arg for name, value in serve.items() for arg in (f"--{name}", value)]
    with (
        impaired_path(impairment, impairment, seed=seed) as path,
        reference_server(
            tls=True,
            http3=True,
            tmp_path=tmp,
            host=path.server_addr,
            command_prefix=path.server(*PRIORITY),
            extra_args=extra,
        ) as server,
    ):
        yield Lab(path, server)


@pytest.fixture(scope="module")
def rtt40(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """20 ms each way, no loss; short immediate answers unless a test asks otherwise."""
    with _lab_on(
        Impairment(delay_ms=ONE_WAY_MS), tmp_path_factory.mktemp("rtt40"), tokens="5", rate="0"
    ) as lab:
        yield lab


def _assert_one_round_trip(lab: Lab, stages: tuple[str, ...], *args: str) -> None:
    """Each stage waits on the path exactly one round trip: the fastest of RUNS over the
    delayed path is never under RTT_MS (the impairer never releases early), and beyond
    the fastest of RUNS with the delay off, run alternately, it is within one RTT."""
    delayed: list[dict[str, float]] = []
    direct: list[dict[str, float]] = []
    for _ in range(RUNS):
        delayed.append(lab.run(*args)["stages_ms"])
        with lab.path.impaired(Impairment(), Impairment()):
            direct.append(lab.run(*args)["stages_ms"])
    for stage in stages:
        slow = sorted(run[stage] for run in delayed)
        fast = sorted(run[stage] for run in direct)
        waited = slow[0] - fast[0]
        why = f"{stage}: delayed {slow}, delay off {fast}"
        timing.note(f"{stage} fastest delayed ms", slow[0], RTT_MS, None)
        timing.note(f"{stage} waited ms", waited, None, RTT_MS + WAIT_SLACK_MS)
        assert slow[0] >= RTT_MS, why
        assert waited <= RTT_MS + WAIT_SLACK_MS, why


def _connect_rtts_ms(lab: Lab, count: int) -> list[tuple[float, float]]:
    """TCP connects to the endpoint's port from the client namespace: per connect, the
    time connect() took as the process saw it, and the kernel's own RTT sample of the
    SYN / SYN-ACK (TCP_INFO tcpi_rtt, µs; taken when the SYN-ACK arrives, so the client
    process's wake-up after it is not in it)."""
    script = (
        "import socket, struct, sys, time\n"
        "for _ in range(int(sys.argv[3])):\n"
        "    s = socket.socket()\n"
        "    t = time.perf_counter_ns()\n"
        "    s.connect((sys.argv[1], int(sys.argv[2])))\n"
        "    took = (time.perf_counter_ns() - t) / 1e6\n"
        "    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)\n"
        "    print(took, struct.unpack_from('=68xI', info)[0] / 1e3)\n"
        "    s.close()\n"
    )
    command = lab.path.client(
        *PRIORITY,
        sys.executable,
        "-c",
        script,
        lab.path.server_addr,
        str(lab.server.port),
        str(count),
    )
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    pairs = [line.split() for line in out.stdout.splitlines()]
    return [(float(took), float(kernel)) for took, kernel in pairs]


def test_impairer_adds_its_delay_and_well_under_a_millisecond_more(rtt40: Lab) -> None:
    # Observed (100 connects; a TCP connect is one round trip): median 40.27 ms, p90 40.31,
    # max 40.71; with --delay-ms 0 the same path measures median 0.11 ms. UDP echo: median
    # 40.36 (0.34 at delay 0). The pump wakes 200 µs early and polls: select() alone woke
    # a median 67 µs late here, twice per round trip.
    # That was connect() timed by the process; at load 7-9 the client's wake-up after the
    # SYN-ACK put its median at 43.4 ms (bound 41.5). The kernel's own RTT sample of the
    # handshake leaves that out and keeps the pump's precision in: 3 x 30 connects beside
    # the flake check's two CPU hogs (load 6.6-6.7 + 2), kernel median 40.08-40.09 ms, max
    # 40.22, while connect() read median 41.2-43.7, max 57.3; delay off: median 0.03 ms.
    connects = _connect_rtts_ms(rtt40, 30)
    took = [c for c, _ in connects]
    rtts = [k for _, k in connects]
    timing.note("connect() min ms", min(took), RTT_MS, None)
    timing.note("kernel rtt min ms", min(rtts), RTT_MS, None)
    timing.note("kernel rtt median ms", statistics.median(rtts), None, RTT_MS + 1.5)
    assert min(took) >= RTT_MS, f"a packet left early: {sorted(took)[:3]}"
    assert min(rtts) >= RTT_MS, f"a packet left early: {sorted(rtts)[:3]}"
    assert statistics.median(rtts) <= RTT_MS + 1.5, sorted(rtts)


def test_tcp_connect_and_tls13_each_take_one_round_trip(rtt40: Lab) -> None:
    _assert_one_round_trip(rtt40, ("connect", "tls"), "--http", "2")


def test_quic_handshake_takes_one_round_trip(rtt40: Lab) -> None:
    _assert_one_round_trip(rtt40, ("quic_handshake",), "--http", "3")


def test_compare_http_measures_http3_saving_one_round_trip_of_setup(rtt40: Lab) -> None:
    # Measured rows only (the verdict words belong to report/compare_http.py): HTTP/2's setup is
    # TCP connect + TLS 1.3 (2 RTT), HTTP/3's the QUIC handshake (1 RTT).
    savings = []
    verdicts = []
    for _ in range(RUNS):
        compared = rtt40.run("--compare-http")
        h2, h3 = (run["stages_ms"] for run in compared["results"])
        savings.append(h2["connect"] + h2["tls"] - h3["quic_handshake"])
        # Not loopback, and a round trip is far beyond a quiet machine's noise floor: the
        # measured handshake row names HTTP/3, never HTTP/2 (the verdict must not flip).
        # Flake check round 3 (load ~9, two CPU hogs): one compare of 5 read HTTP/2 94.8 ms
        # against HTTP/3 87.8 ms, and the row said "same": noise that large is no win, and
        # the report says so. Later, at load ~10 (flake_suite round 1, and 1 of 10 flake
        # check rounds), two of 5 said "same" (3, 5, 5 ... of 5 named HTTP/3 over 10 rounds).
        # What must hold is that the row never names HTTP/2 and most compares see the
        # saving; the saving itself is held below.
        handshake = compared["differences"]["handshake_ms"]
        assert handshake["measured"] and handshake["better"] in ("http3", "same"), handshake
        verdicts.append(handshake["better"])
    timing.note("compares naming http3", verdicts.count("http3"), RUNS // 2 + 1, None)
    assert verdicts.count("http3") > RUNS // 2, verdicts
    saving = statistics.median(savings)
    timing.note("h3 setup saving ms", saving, RTT_MS - SLACK_MS - QUIC_CPU_MS, RTT_MS + SLACK_MS)
    assert RTT_MS - SLACK_MS - QUIC_CPU_MS <= saving <= RTT_MS + SLACK_MS, savings


def test_a_stream_survives_loss_and_retransmissions_show_as_token_stalls(
    rtt40: Lab, tmp_path: Path
) -> None:
    # HTTP/1.1: over this path an HTTP/2 stream of 130 KB at 200 tokens/s shows 16-44 ms
    # gaps with no loss at all (observed; its 65,535-byte flow-control window, we think),
    # which would blur the retransmission stalls this test is about.
    stream = ("--http", "1.1", "--max-tokens", str(LOSS_TOKENS))
    headers = ("-H", f"x-promptpath-tokens: {LOSS_TOKENS}", "-H", f"x-promptpath-rate: {LOSS_RATE}")
    clean = rtt40.run(*stream, *headers)
    with _lab_on(Impairment(delay_ms=ONE_WAY_MS, loss=LOSS), tmp_path, seed=1) as lossy:
        lost = lossy.run(*stream, *headers)
        counters = lossy.path.counters()
    # Observed (seeds 1-3): every stream completes (TCP retransmits), 4-10 of ~400 packets
    # dropped each way, and the gaps ≥ 1 RTT go from 0 (largest gap 22 ms) to 6-7, of
    # 45-70 ms: a retransmission after the duplicate ACKs of the next segments, one RTT
    # plus their 5 ms spacing. A lost SYN (seen in hand runs) costs connect its 1 s timer.
    for result in (clean, lost):
        assert result["stream"]["end"] == "marker", result["stream"]
        assert result["tokens"]["count"] == LOSS_TOKENS
    assert counters["down"]["lost"] > 0, counters
    stalls = [sum(g >= RTT_MS for g in r["tokens"]["gaps"]) for r in (clean, lost)]
    assert stalls[1] >= 2 and stalls[1] > stalls[0], (stalls, lost["tokens"]["gaps_ms"])

"""promptpath's HTTP/3 key log opens a real capture in tshark.

The reference endpoint with HTTP/3 on 127.0.0.1, dumpcap on `lo` filtered on its UDP port
(root or CAP_NET_RAW), one traced request with SSLKEYLOGFILE set, then tshark decrypts.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.tracer.orchestrator import trace
from tests.conftest import lab_required, require_binary
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab


@pytest.fixture
def h3_server(tmp_path: Path) -> Iterator[RefServer]:
    with reference_server(http3=True, tmp_path=tmp_path / "ref") as srv:
        assert srv.http3
        yield srv


def _capture(path: Path, port: int) -> subprocess.Popen[str]:
    dumpcap = require_binary("dumpcap")
    if os.geteuid() != 0:
        reason = "capturing on lo needs root"
        if lab_required():
            pytest.fail(f"PROMPTPATH_REQUIRE_LAB=1 but {reason}")
        pytest.skip(reason)
    proc = subprocess.Popen(
        [dumpcap, "-q", "-i", "lo", "-f", f"udp port {port}", "-w", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # dumpcap names its file once the interface is capturing
        if line.startswith("File:"):
            return proc
    pytest.fail(f"dumpcap exited with status {proc.wait()}")


def _tshark(pcap: Path, *args: str) -> list[str]:
    tshark = require_binary("tshark")
    cmd = [tshark, "-r", str(pcap), *args, "-T", "fields", "-e", "tls.handshake.type"]
    cmd += ["-e", "http3.frame_type"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
    return [line for line in out.splitlines() if line.strip()]


async def test_the_http3_key_log_decrypts_the_capture(h3_server: RefServer, tmp_path: Path) -> None:
    require_binary("tshark")
    tmp_path.chmod(0o755)  # dumpcap may drop to another user to write the file
    pcap, keylog = tmp_path / "lo.pcapng", tmp_path / "keys.log"
    dumpcap = _capture(pcap, h3_server.port)
    try:
        args = RunArgs(
            target=f"https://localhost:{h3_server.port}/v1/chat/completions",
            http="3",
            cacert=h3_server.ca,
            family=socket.AF_INET,
            resolve=[f"localhost:{h3_server.port}:127.0.0.1"],
        )
        result = await trace(build_options(args, environ={"SSLKEYLOGFILE": str(keylog)}))
        assert result.exc is None, result.exc
    finally:
        time.sleep(1.0)  # libpcap hands packets over in blocks retired on a 250 ms timer
        dumpcap.send_signal(signal.SIGINT)
        dumpcap.wait(10)

    # Observed (tshark 4.0.17): without keys only the Initial packets' ClientHello (1) and
    # ServerHello (2) dissect; with promptpath's key log the encrypted handshake (8
    # EncryptedExtensions ... 20 Finished) and the HTTP/3 frames (4 SETTINGS, 1 HEADERS,
    # 0 DATA) do.
    def seen(rows: list[str], column: int) -> set[str]:
        cells = [row.split("\t")[column] for row in rows if "\t" in row]
        return {value for cell in cells for value in cell.split(",") if value}

    blind = _tshark(pcap)
    assert seen(blind, 0) == {"1", "2"} and not seen(blind, 1)
    decrypted = _tshark(pcap, "-o", f"tls.keylog_file:{keylog}")
    assert {"1", "2", "8", "20"} <= seen(decrypted, 0)
    assert {"0", "1", "4"} <= seen(decrypted, 1)

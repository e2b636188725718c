"""Through a forward proxy the socket's peer is the proxy: the round trip the kernel holds
is the proxy's hop, so the report says whose it is and takes nothing off TTFT.

tinyproxy (a real one, tests/helpers/fwdproxy.py) tunnels to the reference endpoint, both
on loopback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.fwdproxy import tinyproxy
from tests.helpers.refserver import reference_server

pytestmark = pytest.mark.lab


def test_through_a_proxy_the_round_trip_is_the_proxys_hop_and_ttft_is_not_adjusted(
    tmp_path: Path,
) -> None:
    with reference_server(tls=True, tmp_path=tmp_path) as origin, tinyproxy() as proxy:
        url = f"https://localhost:{origin.port}/v1/chat/completions"
        common = ("--cacert", str(origin.ca), "-x", proxy.url, "--max-tokens", "8")
        result = run_cli("run", url, "--json", *common)
        text = run_cli("run", url, *common)
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    rtt = body["rtt"]
    assert rtt["source"] == "tcp_info" and rtt["hop"] == "proxy", rtt
    assert rtt["min_ms"] is not None and rtt["min_ms"] > 0  # the hop's, read all the same
    assert body["rtt_ms"] is None
    assert body["ttft_network_adjusted_ms"] is None
    assert body["ttft_ms"]["from_request"] is not None
    assert text.exit_code == 0
    assert "is the proxy's hop, not the origin's: TTFT not adjusted" in text.stderr

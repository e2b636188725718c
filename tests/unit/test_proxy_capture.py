"""benchmarks/proxy_capture.py reads the proxy stages off tshark's rows: the frames are the
ones squid 5.7 and tshark 4.0.17 showed for a CONNECT tunnel and an absolute-form request
(checked by hand, `-d tcp.port==P,http`); only the client <-> proxy flows count."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "proxy_capture.py"
PROXY, ORIGIN, CLIENT, SQUID_SIDE = 3128, 8443, 40000, 50000


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_bench_proxy_capture", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _row(t_ms: float, src: int, dst: int, flags: str = "", length: int = 0, **kw: str) -> list[str]:
    """One tshark row in FIELDS order; ``flags``: S (SYN) and/or A (ACK)."""
    syn, ack = ("1" if "S" in flags else "0"), ("1" if "A" in flags else "0")
    fields = [kw.get(name, "") for name in ("method", "response", "hs", "h2")]
    return [f"{t_ms / 1e3:.9f}", str(src), str(dst), syn, ack, str(length), *fields]


def test_a_tunnel_gives_every_stage_from_the_client_proxy_flow() -> None:
    pc = _load()
    rows = [
        _row(0.000, CLIENT, PROXY, "S"),
        _row(0.010, PROXY, CLIENT, "SA"),
        _row(0.020, CLIENT, PROXY, "A"),
        _row(0.500, CLIENT, PROXY, "A", 59, method="CONNECT"),
        _row(0.600, SQUID_SIDE, ORIGIN, "S"),  # squid's own connection: not ours
        _row(0.610, ORIGIN, SQUID_SIDE, "SA"),
        _row(0.700, PROXY, CLIENT, "A", 39, response="1"),  # 200 Connection established
        _row(1.000, CLIENT, PROXY, "A", 517, hs="1"),
        _row(2.000, PROXY, CLIENT, "A", 851, hs="2,8,11,15,20"),
        _row(2.500, CLIENT, PROXY, "A", 80, hs="20"),
        _row(2.600, PROXY, CLIENT, "A", 542, hs="4,4"),  # session tickets
        _row(3.000, CLIENT, PROXY, "A", 308),  # the request, encrypted
        _row(4.000, PROXY, CLIENT, "A", 244, response="1"),
    ]
    flows = pc.flows_from_rows(rows, PROXY)
    assert set(flows) == {(CLIENT, PROXY)}
    assert flows[(CLIENT, PROXY)].syns == 1
    ms = flows[(CLIENT, PROXY)].ms()
    expected = {"proxy_connect": 0.01, "tunnel": 0.2, "tls": 1.5, "setup": 2.5}
    expected |= {"request": 0.5, "wait": 1.0}
    assert ms == pytest.approx(expected, abs=1e-6)


def test_an_absolute_form_request_has_no_tunnel_and_no_tls() -> None:
    pc = _load()
    rows = [
        _row(0.000, CLIENT, PROXY, "S"),
        _row(0.006, PROXY, CLIENT, "SA"),
        _row(0.300, CLIENT, PROXY, "A", 250, method="POST"),
        _row(1.300, PROXY, CLIENT, "A", 300, response="1"),
        _row(1.400, PROXY, CLIENT, "A", 90),
    ]
    ms = pc.flows_from_rows(rows, PROXY)[(CLIENT, PROXY)].ms()
    assert ms == pytest.approx({"proxy_connect": 0.006, "wait": 1.0}, abs=1e-6)

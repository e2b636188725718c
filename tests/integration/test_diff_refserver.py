"""`promptpath diff` on series measured against the reference endpoint over loopback.

The endpoint's first-token delay is set per request (``x-promptpath-ttft-ms``) and it
sends three tokens at once (``--rate 0``), so a run lasts about its delay: the series
here cost ~8 s together (10 runs at 100 ms, 10 at 400 ms, 30 at 100 ms).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

STAGES_UNCHANGED = ("dns", "connect", "tls", "request", "wait")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("diff"),
        extra_args=["--rate", "0", "--tokens", "3"],
    ) as ref:
        yield ref


def _series(server: RefServer, ttft_ms: int, count: int) -> dict[str, Any]:
    url = f"https://localhost:{server.port}/v1/chat/completions"
    res = run_cli(
        "run", url, "--cacert", str(server.ca), "--count", str(count), "--json",
        "-H", f"x-promptpath-ttft-ms: {ttft_ms}",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    body: dict[str, Any] = json.loads(res.stdout)
    return body


@pytest.fixture(scope="module")
def documents(server: RefServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("diffdocs")
    out = {}
    for name, ttft, count in (("before", 100, 10), ("after", 400, 10), ("steady", 100, 30)):
        path = folder / f"{name}.json"
        path.write_text(json.dumps(_series(server, ttft, count)))
        out[name] = path
    return out


def _diff(before: Path, after: Path) -> tuple[int, dict[str, Any]]:
    res = run_cli("diff", str(before), str(after), "--json")
    assert res.exit_code in (0, 1), res.stderr
    return res.exit_code, json.loads(res.stdout)


def test_a_300_ms_slower_first_token_is_named_and_the_setup_stages_are_not(
    documents: dict[str, Path],
) -> None:
    code, body = _diff(documents["before"], documents["after"])
    assert code == ExitCode.FINDING
    metrics = {m["name"]: m for m in body["metrics"]}
    # Measured over 10 repeated pairs of series on the loaded machine (load ~3): the median
    # first_token moved by 296.8–302.5 ms, the median TTFT (from t0, so the setup's noise
    # too) by 293.3–320.2 ms. Tolerances: 15 ms and 40 ms.
    for name, tolerance in (("first_token", 15), ("ttft", 40)):
        assert metrics[name]["verdict"] == "regressed"
        assert abs(metrics[name]["delta"] - 300) <= tolerance, metrics[name]
    for name in STAGES_UNCHANGED:
        assert metrics[name]["verdict"] == "unchanged", metrics[name]
    assert body["headline"].startswith("TTFT +")
    assert "in first_token (after the request reached the server)" in body["headline"]
    assert "DNS, connect, TLS, request, wait unchanged" in body["headline"]


def test_two_series_of_the_same_settings_show_no_change_20_times_of_20(
    documents: dict[str, Path], tmp_path: Path
) -> None:
    # 20 different 10-against-10 splits of 30 runs measured one after another with the
    # same settings: each split is two series of one unchanged path.
    steady = json.loads(documents["steady"].read_text())
    runs = steady["runs"]
    for seed in range(20):
        picked = random.Random(seed).sample(range(len(runs)), 20)
        sides = [picked[:10], picked[10:]]
        paths = []
        for side, indices in zip(("a", "b"), sides, strict=True):
            path = tmp_path / f"{seed}-{side}.json"
            path.write_text(json.dumps(steady | {"runs": [runs[i] for i in indices]}))
            paths.append(path)
        code, body = _diff(*paths)
        changed = [m["name"] for m in body["metrics"] if m["verdict"] in ("regressed", "improved")]
        assert (code, changed, body["facts"]) == (0, [], []), (seed, body["headline"])

"""The docs' command lines that need a lab component, run: through a real forward proxy
(tinyproxy) and into a real Prometheus Pushgateway, each started by the test on loopback,
the target rewritten to the reference endpoint as tests/helpers/doccommands.py does.
The impairer lab's lines (root, network namespaces) are left to tests/lab/test_impaired_path.py;
tests/integration/test_docs_commands.py parses every one of these lines."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.doccommands import (
    FAST_ENDPOINT,
    PARSED_ONLY,
    ClientPki,
    DocCommand,
    Lab,
    assert_loopback_only,
    make_client_pki,
    rewrite,
)
from tests.helpers.fwdproxy import tinyproxy
from tests.helpers.promlab import pushgateway
from tests.helpers.proxylab import Proxy
from tests.helpers.refserver import RefServer, reference_server

#: `vantage` lines run against tests/lab/test_vantage.py's fleet, not here.
LAB_LINES = [c for c in PARSED_ONLY if not c.netns and c.argv[:1] != ["vantage"]]


@pytest.fixture(scope="module")
def tls_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True, extra_args=FAST_ENDPOINT, tmp_path=tmp_path_factory.mktemp("ref")
    ) as server:
        yield server


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ClientPki:
    return make_client_pki(tmp_path_factory.mktemp("client-pki"))


@pytest.fixture(scope="module")
def forward_proxy() -> Iterator[Proxy]:
    with tinyproxy() as proxy:
        yield proxy


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    with pushgateway(tmp_path_factory.mktemp("pushgateway")) as server:
        yield server


def test_the_docs_have_lab_lines() -> None:
    assert any("--pushgateway" in c.argv for c in LAB_LINES)
    assert any("-x" in c.argv for c in LAB_LINES)


@pytest.mark.parametrize("cmd", LAB_LINES, ids=[c.where for c in LAB_LINES])
def test_doc_command_runs_through_the_lab(
    cmd: DocCommand,
    request: pytest.FixtureRequest,
    pki: ClientPki,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    proxied = "-x" in cmd.argv or any(k.lower().endswith("_proxy") for k in cmd.env)
    lab = Lab(
        proxy=request.getfixturevalue("forward_proxy").url if proxied else None,
        pushgateway=request.getfixturevalue("gateway").url if "--pushgateway" in cmd.argv else None,
    )
    argv, env = rewrite(cmd, request.getfixturevalue, pki, tmp_path, lab)
    assert_loopback_only(argv, env)
    res = run_cli(*argv, environ=env)
    assert res.exit_code == 0, f"{cmd.where}: {cmd.text}\nran: {argv}\n{res.stderr}"
    # The report's PROXY line (observed on tinyproxy 1.11.1): the tunnel, or the bypass.
    if proxied and "--noproxy" in argv:
        assert "bypassed: 127.0.0.1 matches --noproxy" in res.stderr, res.stderr
    elif proxied:
        assert "CONNECT → 200" in res.stderr and "tinyproxy" in res.stderr, res.stderr
    if lab.pushgateway is not None:
        with urllib.request.urlopen(f"{lab.pushgateway}/metrics", timeout=5) as answer:
            pushed = answer.read().decode()
        assert "promptpath_success{" in pushed and 'region="eu-west"' in pushed

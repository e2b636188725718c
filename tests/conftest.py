"""Fixtures shared by every test layer."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis times every example against a 200 ms deadline and its data generation against
# a health check: timing bounds on a machine whose 2 cores other suites share. A worker
# descheduled mid-example fails the test as "unreliable" though nothing is wrong (seen:
# tests/unit/test_slo.py, 2 of 3 runs with its process paused 300 ms every 310 ms,
# "DeadlineExceeded: Test took 301.88ms"). Property tests here judge results, not speed.
settings.register_profile("promptpath", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("promptpath")

_STRIPPED_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    # AWS: keys, the profile and the files botocore would read them from
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    # The OTLP exporter reads these from os.environ itself (headers, TLS, endpoints).
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy, CA override or real API key from the developer's shell leaks into a test."""
    for name in _STRIPPED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    # Nothing may call out for AWS credentials (instance metadata) in a test.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("COLUMNS", "100")


def lab_required() -> bool:
    return os.environ.get("PROMPTPATH_REQUIRE_LAB") == "1"


def require_binary(name: str) -> str:
    """Path of a lab component, or skip (a failure under PROMPTPATH_REQUIRE_LAB=1)."""
    for candidate in (name, f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        path = shutil.which(candidate)
        if path:
            return path
    reason = f"{name} is not installed (apt-get install {name})"
    if lab_required():
        pytest.fail(f"PROMPTPATH_REQUIRE_LAB=1 but {reason}")
    pytest.skip(reason)


#: Test layers by folder: ``-m "unit or integration"`` is the quick subset (no lab).
_LAYERS = ("unit", "integration", "lab")


#: Files whose tests hold a measured time to a bound (benchmarks/flake_check.py's TIMED
#: list, and the integration files whose deadlines and cadences are asserted). Under
#: ``pytest -n`` (pyproject's addopts) they form one scheduling unit, so a single worker runs
#: them one at a time, each beside at most the other workers' tests: the condition their
#: bounds were measured in (flake_check.py: 10 rounds beside two CPU hogs). Every other
#: file goes whole to one worker, so its module-scoped lab (an nginx, a LiteLLM) starts once.
_TIMED_FILES = frozenset(
    {
        "tests/integration/test_buffering_loopback.py",
        "tests/integration/test_exporter_hostile.py",
        "tests/integration/test_exporter_http.py",
        "tests/integration/test_first_output.py",
        "tests/integration/test_http3.py",
        "tests/integration/test_prefill_probe.py",
        "tests/integration/test_server_telemetry.py",
        "tests/integration/test_timeout_time.py",
        "tests/lab/test_buffering.py",
        "tests/lab/test_canary_controls.py",
        "tests/lab/test_client_cpu_wait.py",
        "tests/lab/test_dialect_hops.py",
        "tests/lab/test_edges_probe.py",
        "tests/lab/test_ghost_stream.py",
        "tests/lab/test_hol_probe.py",
        "tests/lab/test_idle_timeout.py",
        "tests/lab/test_impaired_path.py",
        "tests/lab/test_pcap.py",
        "tests/lab/test_network_adjusted_ttft.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        layer = next((name for name in _LAYERS if f"/tests/{name}/" in str(item.path)), None)
        if layer is not None:
            item.add_marker(getattr(pytest.mark, layer))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under ``pytest -n``: whole files to a worker, the timing-bounded ones all to one.

    xdist's LoadScopeScheduling with our own scope (its documented extension point; its
    ``loadfile`` mode overrides the same method). Not ``xdist_group`` marks: xdist 3.8
    appends the group to ``item._nodeid``, which pytest 9 no longer reads (seen: no
    ``@group`` suffix, one file's tests on three workers)."""
    from xdist.scheduler import LoadScopeScheduling

    class FilesTimedTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "timed" if path in _TIMED_FILES else path

    return FilesTimedTogether(config, log)

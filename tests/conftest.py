"""Fixtures shared by every test layer."""

from __future__ import annotations

import os
import shutil

import pytest

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        layer = next((name for name in _LAYERS if f"/tests/{name}/" in str(item.path)), None)
        if layer is not None:
            item.add_marker(getattr(pytest.mark, layer))

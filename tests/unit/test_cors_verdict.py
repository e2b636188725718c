"""The cors verdict on given answers: wildcard or echoed origins on an endpoint that takes
a key, credentials, fixed lists, failed preflights."""

from __future__ import annotations

import pytest

from promptpath.core.findings import Verdict
from promptpath.probes.cors.verdict import PROBE_ORIGIN, Preflight, judge

pytestmark = pytest.mark.unit

AUTH = ("Access-Control-Allow-Headers", "authorization, content-type")


def pre(*headers: tuple[str, str], status: int = 204) -> Preflight:
    return Preflight(status=status, headers=headers)


def test_wildcard_with_authorization_allowed_fails_and_quotes_headers() -> None:
    found = judge(pre(("Access-Control-Allow-Origin", "*"), AUTH), [], takes_key=True)
    assert found.verdict is Verdict.FAIL
    assert found.summary.startswith("allows Access-Control-Allow-Origin: * with Authorization")
    assert "access-control-allow-origin: *" in found.summary
    assert found.evidence["preflight"]["headers"]["access-control-allow-origin"] == "*"  # type: ignore[index]


def test_reflected_origin_with_credentials_fails() -> None:
    found = judge(
        pre(
            ("Access-Control-Allow-Origin", PROBE_ORIGIN),
            ("Access-Control-Allow-Credentials", "true"),
        ),
        [],
        takes_key=False,
    )
    assert found.verdict is Verdict.FAIL
    assert found.summary.startswith("reflects any origin with credentials allowed")


def test_reflected_origin_allowing_authorization_fails() -> None:
    found = judge(pre(("Access-Control-Allow-Origin", PROBE_ORIGIN), AUTH), [], takes_key=False)
    assert found.verdict is Verdict.FAIL and "any origin (echoed back)" in found.summary


def test_wildcard_on_the_response_of_a_keyed_endpoint_warns() -> None:
    found = judge(Preflight(status=405), [("access-control-allow-origin", "*")], takes_key=True)
    assert found.verdict is Verdict.WARN
    assert "the response carried access-control-allow-origin: *" in found.summary


def test_a_failed_preflight_grants_nothing() -> None:
    found = judge(pre(("Access-Control-Allow-Origin", "*"), AUTH, status=405), [], takes_key=True)
    assert found.verdict is Verdict.PASS


def test_wildcard_on_a_public_endpoint_passes() -> None:
    found = judge(pre(("Access-Control-Allow-Origin", "*")), [], takes_key=False)
    assert found.verdict is Verdict.PASS and "takes no key" in found.summary


def test_a_fixed_list_passes() -> None:
    found = judge(pre(AUTH), [], takes_key=True)
    assert found.verdict is Verdict.PASS
    assert found.summary.startswith(f"does not allow an unrelated origin ({PROBE_ORIGIN})")


def test_no_cors_headers_passes_and_says_so() -> None:
    found = judge(Preflight(status=None, error="refused"), [], takes_key=True)
    assert found.verdict is Verdict.PASS
    assert found.summary.startswith("no CORS headers") and "(preflight: refused)" in found.summary

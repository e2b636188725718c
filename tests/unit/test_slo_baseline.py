"""The SLO grammar's baseline forms (core/slo.py): parsed, resolved against a baseline's
values, judged; bad forms point at their mistake."""

from __future__ import annotations

import pytest

from promptpath.core.errors import UsageError
from promptpath.core.slo import evaluate, parse_slo, with_baseline


def test_a_multiple_of_the_baseline() -> None:
    slo = parse_slo("ttft_p95 < 1.5x baseline")
    assert (slo.baseline, slo.amount, slo.rule()) == ("factor", 1.5, "1.5x baseline")
    [resolved] = with_baseline([slo], {"ttft_p95": 200.0})
    assert resolved.threshold == 300.0 and resolved.baseline_value == 200.0
    [held] = evaluate([resolved], {"ttft_p95": 299.0})
    [breached] = evaluate([resolved], {"ttft_p95": 301.0})
    assert held.ok and not breached.ok
    assert breached.breach() == "ttft_p95 < 1.5x baseline breached (301 ms)"
    assert breached.as_dict()["baseline"] == {"rule": "1.5x baseline", "value": 200.0}


def test_an_offset_from_the_baseline_in_the_metrics_unit() -> None:
    slo = parse_slo("connect_p50 < baseline + 10ms")
    assert (slo.baseline, slo.amount) == ("offset", 10.0)
    assert parse_slo("connect_p50<baseline+0.01s").amount == pytest.approx(10.0)
    assert parse_slo("tokens_per_s_p50 > baseline - 5").amount == -5.0
    assert parse_slo("error_rate <= baseline + 5%").amount == pytest.approx(0.05)
    [resolved] = with_baseline([slo], {"connect_p50": 4.0})
    assert resolved.threshold == 14.0
    assert (
        "baseline + 10.0 ms, baseline 4.0 ms"
        in evaluate([resolved], {"connect_p50": 5.0})[0].describe()
    )


def test_a_baseline_without_the_metric_is_a_breach() -> None:
    [resolved] = with_baseline([parse_slo("quic_handshake_p50 < 2x baseline")], {})
    [result] = evaluate([resolved], {"quic_handshake_p50": 1.0})
    assert not result.ok and result.as_dict()["baseline"] == {"rule": "2x baseline", "value": None}


def test_fixed_slos_pass_through_unchanged() -> None:
    fixed = parse_slo("ttft_p95 < 800ms")
    assert with_baseline([fixed], {"ttft_p95": 1.0}) == [fixed]
    assert "baseline" not in evaluate([fixed], {"ttft_p95": 100.0})[0].as_dict()


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("ttft_p95 < baseline * 2", "expected + or - after baseline"),
        ("ttft_p95 < 0x baseline", "a baseline factor is above 0"),
        ("ttft_p95 < baseline + ", "expected a number after the sign"),
        ("ttft_p95 < baseline + 5 parsecs", "unit 'parsecs'"),
    ],
)
def test_bad_baseline_forms_point_at_the_mistake(expr: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_slo(expr)
    assert message in caught.value.message and "^" in caught.value.message

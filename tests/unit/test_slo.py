"""SLO expressions: the grammar, units, error messages with a caret, and judging values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptpath.core.errors import UsageError
from promptpath.core.exitcodes import ExitCode
from promptpath.core.slo import METRICS, STATS, evaluate, metric_names, parse_slo


@pytest.mark.parametrize(
    ("expr", "metric", "op", "threshold"),
    [
        ("ttft_p95<800ms", "ttft_p95", "<", 800.0),
        ("ttft_p95<800", "ttft_p95", "<", 800.0),  # a bare number is ms
        ("ttft_p95 <= 0.8s", "ttft_p95", "<=", 800.0),
        ("  wait_max>=1.5 s ", "wait_max", ">=", 1500.0),
        ("gap_p99_p50<.25s", "gap_p99_p50", "<", 250.0),
        ("tokens_per_s_p50>20", "tokens_per_s_p50", ">", 20.0),
        ("error_rate<0.05", "error_rate", "<", 0.05),
        ("error_rate<=5%", "error_rate", "<=", 0.05),
        ("tls_days_left>=14", "tls_days_left", ">=", 14.0),
    ],
)
def test_expressions_parse_into_the_metric_op_and_threshold_in_its_unit(
    expr: str, metric: str, op: str, threshold: float
) -> None:
    slo = parse_slo(expr)
    assert (slo.metric, slo.op) == (metric, op)
    assert slo.threshold == pytest.approx(threshold)


def bad(expr: str) -> str:
    with pytest.raises(UsageError) as caught:
        parse_slo(expr)
    assert caught.value.exit_code == ExitCode.USAGE
    return caught.value.message


def caret_column(message: str) -> int:
    """The column the caret points at, within the echoed expression."""
    lines = message.splitlines()
    return lines[2].index("^") - lines[1].index(lines[1].strip())


def test_a_misspelt_metric_is_named_with_its_nearest_neighbour() -> None:
    message = bad("ttft_p59<100ms")
    assert "unknown metric 'ttft_p59': did you mean ttft_p99?" in message
    assert caret_column(message) == 0


def test_a_metric_without_a_statistic_lists_the_names() -> None:
    message = bad("latency<100ms")
    assert "unknown metric 'latency'" in message and "ttft" in message


@pytest.mark.parametrize(
    ("expr", "words", "column"),
    [
        ("ttft_p95=800ms", "expected <, <=, > or >=", 8),
        ("ttft_p95<", "expected a number", 9),
        ("ttft_p95<fast", "expected a number", 9),
        ("ttft_p95<800h", "unit 'h': ttft_p95 takes ms or s", 12),
        ("ttft_p95<800ms!", "unexpected text after the threshold", 12),
        ("error_rate<5ms", "error_rate is a ratio (0.05) or a percentage (5%)", 12),
        ("error_rate<2", "error_rate is between 0 and 1", 11),
        ("tls_days_left>=14d", "tls_days_left takes a bare number", 17),
        ("<800ms", "expected a metric name", 0),
    ],
)
def test_a_malformed_expression_points_at_the_bad_part(expr: str, words: str, column: int) -> None:
    message = bad(expr)
    assert message.startswith(f"--slo {expr!r}: ") and words in message
    assert caret_column(message) == column


@given(
    st.sampled_from(metric_names()),
    st.sampled_from(["<", "<=", ">", ">="]),
    st.integers(0, 10_000),
    st.sampled_from(["", " "]),
)
def test_every_documented_name_parses_with_every_operator(
    name: str, op: str, number: int, space: str
) -> None:
    threshold = number / 10_000 if name == "error_rate" else number
    slo = parse_slo(f"{name}{space}{op}{space}{threshold}")
    assert slo.metric == name and slo.op == op
    assert slo.threshold == pytest.approx(threshold)


def test_the_names_are_each_metric_with_each_statistic_and_the_series_figures() -> None:
    names = metric_names()
    assert len(names) == len(METRICS) * len(STATS) + 2
    assert {"ttft_p95", "tokens_per_s_p50", "gap_p99_max", "error_rate", "tls_days_left"} <= set(
        names
    )


@given(st.floats(0, 5000, allow_nan=False), st.integers(0, 5000))
def test_judging_follows_the_operator(value: float, threshold: int) -> None:
    for op, holds in (
        ("<", value < threshold),
        ("<=", value <= threshold),
        (">", value > threshold),
        (">=", value >= threshold),
    ):
        [result] = evaluate([parse_slo(f"ttft_p95{op}{threshold}")], {"ttft_p95": value})
        assert result.ok is holds and result.value == value


def test_a_value_nothing_measured_breaches() -> None:
    [result] = evaluate([parse_slo("tls_p95<50ms")], {"ttft_p95": 10.0})
    assert result.ok is False and result.value is None
    assert result.describe() == "SLO tls_p95 < 50.0 ms: BREACHED (not measured)"


def test_a_breach_says_the_metric_threshold_and_measured_value() -> None:
    [result] = evaluate([parse_slo("ttft_p95<100ms")], {"ttft_p95": 312.46})
    assert result.describe() == "SLO ttft_p95 < 100.0 ms: BREACHED (measured 312.5 ms)"
    assert result.as_dict() == {
        "expr": "ttft_p95<100ms",
        "metric": "ttft_p95",
        "op": "<",
        "threshold": 100.0,
        "unit": "ms",
        "value": 312.46,
        "ok": False,
    }
    [rate] = evaluate([parse_slo("error_rate<=5%")], {"error_rate": 0.1}, concurrency=8)
    assert rate.describe() == "SLO error_rate <= 5% at concurrency 8: BREACHED (measured 10%)"
    assert rate.as_dict()["concurrency"] == 8

"""Series aggregation and plan checks: pure, against numpy and hand-made timelines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptpath.core.errors import ConnectError, UsageError
from promptpath.core.exitcodes import ExitCode
from promptpath.core.rtt import PathRtt
from promptpath.core.series import (
    MIN_SAMPLES,
    RunSample,
    sample_of,
    series_exit_code,
    single_values,
    slo_values,
    summarize_series,
)
from promptpath.core.slo import SLOResult, evaluate, parse_slo
from promptpath.core.timeline import ErrorInfo, Stage, StreamEvent, Timeline
from promptpath.plan.resolve import parse_plan

MS = 1_000_000
NO_DEADLINE = settings(deadline=None)


def ok(**values: float) -> RunSample:
    return RunSample(values=values)


def failed(stage: str, code: ExitCode) -> RunSample:
    return RunSample(values={}, error_stage=stage, exit_code=int(code))


@NO_DEADLINE
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=300))
def test_percentiles_are_numpys_nearest_rank(ttfts: list[float]) -> None:
    np = pytest.importorskip("numpy")
    stats = summarize_series([ok(ttft=t) for t in ttfts]).aggregate["ttft"]
    assert stats.n == len(ttfts) and stats.min == min(ttfts) and stats.max == max(ttfts)
    for q in (50, 95, 99):
        expected = float(np.percentile(ttfts, q, method="inverted_cdf"))
        assert stats.stat(f"p{q}") == expected


def test_percentile_needs_enough_runs_to_be_more_than_the_maximum() -> None:
    assert MIN_SAMPLES == {"p50": 2, "p95": 20, "p99": 100}
    # 19 runs: the nearest-rank p95 is the largest run; 20: the second largest.
    nineteen = summarize_series([ok(ttft=float(i)) for i in range(19)]).aggregate["ttft"]
    assert nineteen.p95 == nineteen.max and nineteen.too_few_for == ("p95", "p99")
    twenty = summarize_series([ok(ttft=float(i)) for i in range(20)]).aggregate["ttft"]
    assert twenty.p95 < twenty.max and twenty.too_few_for == ("p99",)
    hundred = summarize_series([ok(ttft=float(i)) for i in range(100)]).aggregate["ttft"]
    assert hundred.p99 < hundred.max and hundred.too_few_for == ()


def test_each_metric_counts_only_the_runs_that_had_it() -> None:
    # --reuse: only the first run opened a connection, so only it has dns/connect/tls.
    samples = [ok(dns=1.0, connect=2.0, ttft=30.0), ok(ttft=10.0), ok(ttft=20.0)]
    agg = summarize_series(samples).aggregate
    assert agg["dns"].n == 1 and agg["ttft"].n == 3 and "tls" not in agg


def test_failed_runs_are_counted_by_stage_and_left_out_of_the_distributions() -> None:
    samples = [
        ok(ttft=10.0),
        failed("connect", ExitCode.CONNECT),
        failed("connect", ExitCode.CONNECT),
        failed("wait", ExitCode.TIMEOUT),
    ]
    summary = summarize_series(samples)
    assert summary.failures == {"connect": 2, "wait": 1}
    assert summary.error_rate == 0.75 and summary.aggregate["ttft"].n == 1


def test_slo_values_name_every_statistic_and_the_series_figures() -> None:
    samples = [RunSample(values={"ttft": float(i)}, tls_days_left=40 - i) for i in range(1, 21)]
    values = slo_values(summarize_series(samples))
    assert values["ttft_min"] == 1 and values["ttft_p95"] == 19 and values["ttft_max"] == 20
    assert values["error_rate"] == 0.0 and values["tls_days_left"] == 20  # the worst run's


def test_a_single_run_is_judged_against_its_own_value() -> None:
    values = single_values(ok(ttft=312.0))
    assert {values[f"ttft_{s}"] for s in ("min", "p50", "p95", "p99", "max")} == {312.0}
    assert values["error_rate"] == 0.0
    assert single_values(failed("tls", ExitCode.TLS))["error_rate"] == 1.0


def _timeline() -> Timeline:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.stages += [
        Stage(name="dns", start_ns=0, end_ns=2 * MS),
        Stage(name="connect", start_ns=2 * MS, end_ns=5 * MS),
    ]
    tl.milestones.update(
        dns_done=2 * MS,
        connected=5 * MS,
        request_sent=6 * MS,
        ttfb=50 * MS,
        ttft=100 * MS,
        last_token=130 * MS,
        end=131 * MS,
    )
    for i, t in enumerate((100, 110, 130)):
        tl.events.append(StreamEvent(t_ns=t * MS, kind="content", text=f"t{i}", read_index=i))
    return tl


def test_sample_of_reads_the_metrics_of_a_timeline() -> None:
    sample = sample_of(_timeline(), 0)
    assert sample.values == {
        "dns": 2.0,
        "connect": 3.0,
        "request": 1.0,
        "wait": 44.0,
        "ttft": 100.0,
        "ttft_from_request": 94.0,
        "itl_mean": 15.0,
        "gap_p99": 20.0,
        "tokens_per_s": pytest.approx(1000 / 15),
        "total": 131.0,
    }
    assert sample.ok and sample.error_stage is None and sample.tls_days_left is None


def test_sample_of_takes_one_round_trip_off_ttft_from_the_request_when_one_was_read() -> None:
    tl = _timeline()
    tl.rtt = PathRtt(source="tcp_info", first_ms=41.0, min_ms=40.0, smoothed_ms=44.0)
    assert sample_of(tl, 0).values["ttft_network_adjusted"] == 54.0  # 94 - 40
    tl.rtt = PathRtt(source="tcp_info", first_ms=0.3, min_ms=0.2, smoothed_ms=0.4, hop="proxy")
    assert "ttft_network_adjusted" not in sample_of(tl, 0).values  # the proxy's hop: none


def test_sample_of_a_failed_run_names_its_stage() -> None:
    tl = _timeline()
    tl.error = ErrorInfo.from_error(ConnectError("refused", stage="connect", kind="refused"))
    sample = sample_of(tl, int(ExitCode.CONNECT))
    assert not sample.ok and sample.error_stage == "connect"


# -- exit code precedence -----------------------------------------------------------------
def _judged(expr: str, samples: list[RunSample]) -> list[SLOResult]:
    return evaluate([parse_slo(expr)], slo_values(summarize_series(samples)))


def test_a_breach_exits_9_even_when_some_runs_failed() -> None:
    samples = [ok(ttft=900.0)] * 3 + [failed("connect", ExitCode.CONNECT)]
    assert series_exit_code(samples, _judged("ttft_p95<800", samples)) == ExitCode.SLO


def test_failed_runs_without_an_slo_exit_with_the_most_common_failure() -> None:
    samples = [
        ok(ttft=1.0),
        failed("wait", ExitCode.TIMEOUT),
        failed("connect", ExitCode.CONNECT),
        failed("connect", ExitCode.CONNECT),
    ]
    assert series_exit_code(samples, []) == ExitCode.CONNECT
    tie = [ok(ttft=1.0), failed("wait", ExitCode.TIMEOUT), failed("tls", ExitCode.TLS)]
    assert series_exit_code(tie, []) == ExitCode.TIMEOUT  # a tie: the one seen first


def test_an_slo_on_other_metrics_does_not_excuse_failed_runs() -> None:
    samples = [ok(ttft=100.0)] * 3 + [failed("tls", ExitCode.TLS)]
    assert series_exit_code(samples, _judged("ttft_p95<800", samples)) == ExitCode.TLS


def test_an_error_rate_slo_budgets_for_failed_runs() -> None:
    samples = [ok(ttft=100.0)] * 19 + [failed("tls", ExitCode.TLS)]
    assert series_exit_code(samples, _judged("error_rate<=5%", samples)) == ExitCode.OK
    assert series_exit_code(samples, _judged("error_rate<5%", samples)) == ExitCode.SLO


def test_a_series_where_every_run_failed_exits_like_a_failed_run() -> None:
    samples = [failed("dns", ExitCode.DNS)] * 3
    assert series_exit_code(samples, _judged("ttft_p95<800", samples)) == ExitCode.DNS


def test_a_clean_series_exits_0() -> None:
    samples = [ok(ttft=100.0)] * 3
    assert series_exit_code(samples, _judged("ttft_p95<800", samples)) == ExitCode.OK


# -- the plan -----------------------------------------------------------------------------
def plan(**kwargs: object) -> object:
    args: dict[str, object] = {
        "count": 1,
        "interval_s": 0.0,
        "reuse": False,
        "concurrency": None,
        "connections": None,
    }
    args.update(kwargs)
    return parse_plan(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"count": 0}, "--count must be at least 1, got 0"),
        ({"count": 3, "interval_s": -1.0}, "--interval must be 0 or more seconds"),
        ({"count": 3, "interval_s": float("nan")}, "--interval must be 0 or more seconds"),
        ({"count": 3, "interval_s": float("inf")}, "--interval must be 0 or more seconds"),
        ({"count": 3, "interval_s": 1e300}, "--interval must be at most 86400 s (a day)"),
        ({"count": 3, "interval_s": 86_400.5}, "--interval must be at most 86400 s (a day)"),
        ({"count": 4, "concurrency": "8"}, "--concurrency 8 is more than --count 4"),
        ({"count": 64, "concurrency": "1,8,128"}, "--concurrency 128 is more than --count 64"),
        ({"count": 4, "concurrency": "2,x"}, "'x' is not one"),
        ({"count": 4, "concurrency": "0"}, "'0' is not one"),
        ({"count": 8, "concurrency": "2,2"}, "a level is repeated"),
        ({"count": 8, "concurrency": "4", "connections": 5}, "--connections 5 is more than"),
        ({"count": 8, "connections": 2}, "--connections needs --concurrency"),
        ({"count": 8, "concurrency": "4", "reuse": True}, "--reuse is for streams one after"),
        ({"count": 1, "reuse": True}, "--reuse is for a series: add --count N"),
        ({"count": 1, "interval_s": 2.0}, "--interval is for a series: add --count N"),
    ],
)
def test_bad_series_options_are_usage_errors_naming_the_option(
    kwargs: dict[str, object], words: str
) -> None:
    with pytest.raises(UsageError) as caught:
        plan(**kwargs)
    assert words in caught.value.message and caught.value.exit_code == ExitCode.USAGE


def test_a_sweep_plan_runs_count_prompts_per_level() -> None:
    sweep = parse_plan(count=64, interval_s=0, reuse=False, concurrency="1, 8,64", connections=4)
    assert sweep.concurrency == (1, 8, 64) and sweep.connections == 4
    assert sweep.requests == 192 and sweep.is_series
    single = parse_plan(count=1, interval_s=0, reuse=False, concurrency=None, connections=None)
    assert not single.is_series and single.requests == 1

"""`promptpath vantage`'s pure core: the PromQL asked, Prometheus' answers read into a
table (every answer untrusted), and the judgement of which vantage stands out."""

from __future__ import annotations

from typing import Any

import pytest

from promptpath.core.errors import UsageError
from promptpath.core.vantage.judge import MIN_RUNS, change_floor, judge
from promptpath.core.vantage.queries import Selection, check_label, parse_since, quote
from promptpath.core.vantage.table import BadAnswer, Cell, Row, Table, build


# -- queries -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("1h", 3600), ("1h30m", 5400), ("2d", 172800), ("1w", 604800)],
)
def test_since_takes_prometheus_durations(text: str, seconds: int) -> None:
    assert parse_since(text) == seconds


@pytest.mark.parametrize("text", ["", "1", "h", "1x", "1h 30m", "-1h", "0s", "91d", "1h30"])
def test_a_bad_since_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--since"):
        parse_since(text)


def test_the_queries_select_the_by_label_target_and_module() -> None:
    queries = Selection(by="region", target="openai", module="chat", since_s=600).queries()
    assert queries["p50"] == (
        "quantile_over_time(0.5, promptpath_stage_duration_seconds"
        '{region!="",quantile="0.5",instance="openai",module="chat"}[600s])'
    )
    assert queries["p95"].startswith("quantile_over_time(0.95, ")
    assert queries["runs"] == (
        'count_over_time(promptpath_success{region!="",instance="openai",module="chat"}[600s])'
    )
    assert queries["edges"].startswith("count_over_time(promptpath_edge{")


def test_a_url_target_selects_the_target_label_quoted() -> None:
    sel = Selection(target='https://x.test/v1?a="b"\\')
    assert 'target="https://x.test/v1?a=\\"b\\"\\\\"' in sel.queries()["ok"]


def test_label_names_and_values_are_checked() -> None:
    assert check_label("vantage", "--by") == "vantage"
    for bad in ("1x", "a-b", "__name__", ""):
        with pytest.raises(UsageError, match="--by"):
            check_label(bad, "--by")
    with pytest.raises(UsageError, match="control characters"):
        quote("a\nb", "--target")


# -- the table ---------------------------------------------------------------------------
def _series(value: float, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [1700000000.0, repr(value)]}


def _answers(cells: dict[tuple[str, str], tuple[float, float, int]]) -> dict[str, Any]:
    """Answers for (vantage, stage) -> (p50 s, p95 s, count), one series each."""
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in ("p50", "p95", "count")}
    for (vantage, stage), (p50, p95, n) in cells.items():
        out["p50"].append(_series(p50, vantage=vantage, stage=stage, instance="api"))
        out["p95"].append(_series(p95, vantage=vantage, stage=stage, instance="api"))
        out["count"].append(_series(n, vantage=vantage, stage=stage, instance="api"))
    return out


def test_the_table_has_a_row_per_vantage_and_stages_in_waterfall_order() -> None:
    answers = _answers(
        {
            ("far", "tls"): (0.05, 0.06, 10),
            ("far", "connect"): (0.04, 0.05, 10),
            ("near", "connect"): (0.001, 0.002, 10),
            ("near", "zeta"): (0.001, 0.002, 10),
        }
    )
    answers["runs"] = [_series(10, vantage="far"), _series(8, vantage="near")]
    answers["ok"] = [_series(10, vantage="far"), _series(6, vantage="near")]
    answers["edges"] = [
        _series(7, vantage="far", edge="FRA"),
        _series(3, vantage="far", edge="AMS"),
    ]
    table = build(answers, "vantage")
    assert table.stages == ("connect", "tls", "zeta")
    far, near = table.rows
    assert far.vantage == "far" and far.cells["connect"] == Cell(p50_ms=40, p95_ms=50, runs=10)
    assert far.edge == "FRA" and far.edges == (("FRA", 7), ("AMS", 3))
    assert near.failed == 2 and near.failure_share == 0.25 and near.edge is None


def test_several_series_in_a_cell_are_merged_by_count() -> None:
    answers = {
        "p50": [
            _series(0.010, vantage="v", stage="tls", instance="a"),
            _series(0.030, vantage="v", stage="tls", instance="b"),
        ],
        "p95": [
            _series(0.020, vantage="v", stage="tls", instance="a"),
            _series(0.040, vantage="v", stage="tls", instance="b"),
        ],
        "count": [
            _series(9, vantage="v", stage="tls", instance="a"),
            _series(1, vantage="v", stage="tls", instance="b"),
        ],
    }
    cell = build(answers, "vantage").rows[0].cells["tls"]
    assert cell == Cell(p50_ms=10, p95_ms=20, runs=10, series=2)


@pytest.mark.parametrize(
    "result",
    [
        {"not": "a list"},
        [["metric"]],
        [{"metric": {"a": 1}, "value": [0, "1"]}],
        [{"metric": {}, "value": [0, 1]}],
        [{"metric": {}, "value": [0, "one"]}],
        [{"metric": {}, "value": [0]}],
    ],
)
def test_an_answer_that_is_not_a_vector_is_refused(result: object) -> None:
    with pytest.raises(BadAnswer):
        build({"p50": result}, "vantage")


def test_a_nan_sample_is_skipped_not_shown() -> None:
    answers = _answers({("v", "tls"): (0.01, 0.02, 5)})
    answers["p50"][0]["value"][1] = "NaN"
    assert build(answers, "vantage").rows == ()


# -- the judgement -----------------------------------------------------------------------
def _row(vantage: str, runs: int = 10, failed: int = 0, **stages: tuple[float, float]) -> Row:
    cells = {s: Cell(p50_ms=p50, p95_ms=p95, runs=runs) for s, (p50, p95) in stages.items()}
    return Row(vantage=vantage, cells=cells, runs=runs, failed=failed)


def _table(*rows: Row) -> Table:
    stages = tuple(dict.fromkeys(s for r in rows for s in r.cells))
    return Table(by="vantage", stages=stages, rows=rows)


def test_a_vantage_beyond_the_others_spread_and_floor_is_named_with_its_stages() -> None:
    verdict = judge(
        _table(
            _row("far", connect=(40.0, 41.0), tls=(45.0, 47.0), wait=(30.0, 31.0)),
            _row("near", connect=(0.3, 1.0), tls=(2.0, 4.0), wait=(25.0, 40.0)),
            _row("near2", connect=(0.4, 2.0), tls=(2.5, 5.0), wait=(26.0, 41.0)),
        )
    )
    assert verdict.standout == "far"
    # wait: 30 ms is inside the others' spread (p95 40.5): not called.
    assert verdict.stages == ("connect", "tls")
    (connect, _tls) = verdict.calls
    assert connect.others_p50_ms == pytest.approx(0.35) and connect.floor_ms == 5.0
    assert "far stands out: connect 40.0 ms" in verdict.summary


def test_a_difference_within_the_practical_floor_is_not_called() -> None:
    # Beyond the others' p95 (1.0 ms) but only 3 ms more: connect's floor is 5 ms.
    verdict = judge(_table(_row("a", connect=(3.5, 4.0)), _row("b", connect=(0.5, 1.0))))
    assert verdict.standout is None and verdict.calls == ()
    assert verdict.summary.startswith("no vantage stands out")


def test_a_difference_within_the_others_spread_is_not_called() -> None:
    # 30 ms slower at the median, but the other's own p95 is 60: noise.
    verdict = judge(_table(_row("a", tls=(40.0, 70.0)), _row("b", tls=(10.0, 60.0))))
    assert verdict.standout is None


def test_too_few_runs_or_one_vantage_leaves_a_stage_unjudged() -> None:
    few = judge(
        _table(_row("a", MIN_RUNS - 1, connect=(90.0, 91.0)), _row("b", connect=(1.0, 1.0)))
    )
    assert few.standout is None and few.unjudged == ("connect",)
    alone = judge(_table(_row("a", connect=(90.0, 91.0))))
    assert alone.unjudged == ("connect",)


def test_a_stage_the_diffs_table_lacks_is_shown_not_judged() -> None:
    assert change_floor("connect", 100.0) == 25.0  # max(5 ms, 25 %)
    assert change_floor("tunnel", 1.0) is None
    verdict = judge(_table(_row("a", tunnel=(90.0, 91.0)), _row("b", tunnel=(1.0, 1.0))))
    assert verdict.standout is None and verdict.unjudged == ("tunnel",)


def test_the_vantage_with_most_stages_called_stands_out() -> None:
    verdict = judge(
        _table(
            _row("a", connect=(50.0, 51.0), tls=(1.0, 2.0), dns=(1.0, 1.0)),
            _row("b", connect=(1.0, 2.0), tls=(60.0, 61.0), dns=(40.0, 41.0)),
            _row("c", connect=(1.0, 2.0), tls=(1.0, 2.0), dns=(1.0, 1.0)),
        )
    )
    assert verdict.standout == "b" and verdict.stages == ("tls", "dns")
    assert [c.vantage for c in verdict.calls] == ["b", "b", "a"]


def test_failures_are_judged_by_the_diffs_error_rate_test() -> None:
    verdict = judge(_table(_row("a", 20, failed=12), _row("b", 20), _row("c", 20, failed=1)))
    (call,) = verdict.failures
    assert call.vantage == "a" and call.share == 0.6 and call.others_share == 0.025
    assert verdict.standout is None and "a fails 60% of its probes" in verdict.summary
    # Two failures in twenty: within chance against one in forty.
    assert judge(_table(_row("a", 20, failed=2), _row("b", 40, failed=1))).failures == ()

"""SLO thresholds: ``--slo 'ttft_p95<800ms'`` parsed, then judged against measured values.

Pure: expressions in, verdicts out. The grammar (README, "SLO thresholds")::

    expr  := name op number [unit]
           | name op number "x" "baseline"                 (a multiple of the baseline's value)
           | name op "baseline" [("+" | "-") number [unit]] (the baseline's value, offset)
    name  := METRIC "_" STAT | "error_rate" | "tls_days_left"
    op    := "<" | "<=" | ">" | ">="
    unit  := "ms" | "s" (times; a bare number is ms) | "%" (error_rate)

The baseline forms (``ttft_p95 < 1.5x baseline``, ``connect_p50 < baseline + 10ms``) need
``run --baseline FILE``: their threshold is computed from the baseline's own value of the
same metric (``with_baseline``) before they are judged; a baseline without that value is
a breach, as any SLO nothing could check.

A malformed expression is a UsageError (exit 2) whose message shows the expression with a
caret under the bad part, and names the nearest metric for a misspelt one.
"""

from __future__ import annotations

import difflib
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from promptpath.core.errors import UsageError

__all__ = [
    "METRICS",
    "SLO",
    "STATS",
    "SLOResult",
    "evaluate",
    "metric_names",
    "parse_slo",
    "with_baseline",
]

Op = Literal["<", "<=", ">", ">="]

#: Per-run metrics an SLO can name, with the unit of their thresholds. The same short
#: names core/series.py aggregates.
METRICS: dict[str, str] = {
    "dns": "ms",
    "connect": "ms",
    "tls": "ms",
    "quic_handshake": "ms",
    "request": "ms",
    "wait": "ms",
    "ttft": "ms",
    "ttft_from_request": "ms",
    # The first answer text (not reasoning, not a tool call): what a user waits for.
    "first_output": "ms",
    "itl_mean": "ms",
    "gap_p99": "ms",
    "tokens_per_s": "tok/s",
    "total": "ms",
}
#: Statistics across the runs of a series (a single run: its own value for each).
STATS = ("min", "p50", "p95", "p99", "max")
#: Whole-series figures, named without a statistic.
_PLAIN: dict[str, str] = {"error_rate": "ratio", "tls_days_left": "days"}

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_NAME = re.compile(r"\s*([A-Za-z0-9_]*)\s*")
_OP = re.compile(r"(<=|>=|<|>)\s*")
_NUMBER = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*")
_UNIT = re.compile(r"([A-Za-z%/]*)\s*$")


def metric_names() -> list[str]:
    """Every name an SLO may use, in the order the README lists them."""
    return [f"{m}_{s}" for m in METRICS for s in STATS] + list(_PLAIN)


def unit_of(name: str) -> str:
    """The unit of a metric name's values: ms, tok/s, ratio or days."""
    if name in _PLAIN:
        return _PLAIN[name]
    return METRICS[name.rsplit("_", 1)[0]]


@dataclass(frozen=True, slots=True, kw_only=True)
class SLO:
    """One threshold: ``metric op threshold``, the threshold in the metric's unit."""

    expr: str
    metric: str
    op: Op
    threshold: float
    #: "factor" (``1.5x baseline``) or "offset" (``baseline + 10ms``); None: a fixed threshold.
    baseline: Literal["factor", "offset"] | None = None
    #: The factor, or the offset in the metric's unit.
    amount: float = 0.0
    #: The baseline's value the threshold was computed from (None: not yet, or none).
    baseline_value: float | None = None

    @property
    def unit(self) -> str:
        return unit_of(self.metric)

    def rule(self) -> str:
        """The baseline part as a person reads it: ``1.5x baseline``, ``baseline + 10 ms``."""
        if self.baseline == "factor":
            return f"{self.amount:g}x baseline"
        sign = "+" if self.amount >= 0 else "-"
        return f"baseline {sign} {_show(abs(self.amount), self.unit)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SLOResult:
    """An SLO judged: the value measured (None: nothing measured it) and whether it held."""

    slo: SLO
    value: float | None
    ok: bool
    #: Which sweep level it was judged at (None outside a --concurrency sweep).
    concurrency: int | None = None

    def as_dict(self) -> dict[str, object]:
        body: dict[str, object] = {
            "expr": self.slo.expr,
            "metric": self.slo.metric,
            "op": self.slo.op,
            "threshold": self.slo.threshold,
            "unit": self.slo.unit,
            "value": None if self.value is None else round(self.value, 6),
            "ok": self.ok,
        }
        if self.concurrency is not None:
            body["concurrency"] = self.concurrency
        if self.slo.baseline is not None:
            value = self.slo.baseline_value
            body["baseline"] = {
                "rule": self.slo.rule(),
                "value": None if value is None else round(value, 6),
            }
        return body

    def describe(self) -> str:
        """One line: the metric, its threshold and what was measured."""
        slo = self.slo
        verdict = "ok" if self.ok else "BREACHED"
        where = "" if self.concurrency is None else f" at concurrency {self.concurrency}"
        measured = (
            "not measured" if self.value is None else f"measured {_show(self.value, slo.unit)}"
        )
        if slo.baseline is not None:
            base = slo.baseline_value
            known = "none in the baseline" if base is None else _show(base, slo.unit)
            measured += f"; {slo.rule()}, baseline {known}"
        return (
            f"SLO {slo.metric} {slo.op} {_show(slo.threshold, slo.unit)}{where}: {verdict}"
            f" ({measured})"
        )

    def breach(self) -> str:
        """The breach as the verdict line names it: ``ttft_p95 < 800ms breached (912 ms)``,
        the threshold as the user wrote it."""
        slo = self.slo
        # parse_slo found the operator in the expression: what follows it is the threshold.
        threshold = slo.expr.split(slo.op, 1)[1].strip()
        where = "" if self.concurrency is None else f" at concurrency {self.concurrency}"
        value = "not measured" if self.value is None else _brief(self.value, slo.unit)
        return f"{slo.metric} {slo.op} {threshold} breached{where} ({value})"


def _brief(value: float, unit: str) -> str:
    """A measured value in as few digits as tell it apart: 912 ms, 4.8 ms, 0.35 ms."""
    if unit == "ms" and math.isfinite(value):
        digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 1 else 2
        return f"{value:.{digits}f} ms"
    return _show(value, unit)


def _show(value: float, unit: str) -> str:
    if unit == "ratio":
        return f"{value * 100:g}%"
    if unit == "days":
        return f"{value:g} days"
    return f"{value:.1f} {unit}" if unit == "ms" else f"{value:g} {unit}"


def _bad(expr: str, at: int, why: str) -> UsageError:
    """The error for ``expr`` with a caret under column ``at``."""
    return UsageError(f"--slo {expr!r}: {why}\n    {expr}\n    {' ' * at}^", kind="bad_option")


def parse_slo(expr: str) -> SLO:
    """``'ttft_p95<800ms'`` → SLO; UsageError pointing at the bad part otherwise."""
    name_match = _NAME.match(expr)
    assert name_match is not None  # the pattern matches the empty string
    name = name_match.group(1)
    known = metric_names()
    if not name:
        raise _bad(expr, name_match.end(), "expected a metric name, e.g. ttft_p95")
    if name not in known:
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f": did you mean {near[0]}?" if near else f" (one of {_families()})"
        raise _bad(expr, name_match.start(1), f"unknown metric {name!r}{hint}")
    pos = name_match.end()
    op_match = _OP.match(expr, pos)
    if op_match is None:
        raise _bad(expr, pos, "expected <, <=, > or >= after the metric")
    op: Op = op_match.group(1)  # type: ignore[assignment]  # the pattern's four values
    pos = op_match.end()
    relative = _baseline_form(expr, pos, name)
    if relative is not None:
        kind, amount = relative
        return SLO(expr=expr.strip(), metric=name, op=op, threshold=0.0, baseline=kind,
                   amount=amount)  # fmt: skip
    number_match = _NUMBER.match(expr, pos)
    if number_match is None:
        raise _bad(expr, pos, "expected a number after the operator")
    number = float(number_match.group(1))
    unit_match = _UNIT.match(expr, number_match.end())
    if unit_match is None:
        raise _bad(expr, number_match.end(), "unexpected text after the threshold")
    threshold = _in_unit(expr, (pos, unit_match.start()), name, number, unit_match.group(1))
    return SLO(expr=expr.strip(), metric=name, op=op, threshold=threshold)


_BASELINE = re.compile(r"baseline\s*")
_FACTOR = re.compile(r"x\s*baseline\s*$")
_SIGN = re.compile(r"([+-])\s*")


def _baseline_form(
    expr: str, pos: int, name: str
) -> tuple[Literal["factor", "offset"], float] | None:
    """``1.5x baseline`` → ("factor", 1.5); ``baseline + 10ms`` → ("offset", 10.0); None
    for a plain threshold."""
    if _BASELINE.match(expr, pos):
        after = _BASELINE.match(expr, pos)
        assert after is not None
        rest = after.end()
        if rest == len(expr.rstrip()):
            return "offset", 0.0
        sign = _SIGN.match(expr, rest)
        if sign is None:
            raise _bad(expr, rest, "expected + or - after baseline (baseline + 10ms)")
        number = _NUMBER.match(expr, sign.end())
        if number is None:
            raise _bad(expr, sign.end(), "expected a number after the sign")
        unit = _UNIT.match(expr, number.end())
        if unit is None:
            raise _bad(expr, number.end(), "unexpected text after the offset")
        at = (sign.end(), unit.start())
        value = _in_unit(expr, at, name, float(number.group(1)), unit.group(1), ratio_check=False)
        return "offset", value if sign.group(1) == "+" else -value
    number = _NUMBER.match(expr, pos)
    if number is None:
        return None
    factor = _FACTOR.match(expr, number.end())
    if factor is None:
        return None
    value = float(number.group(1))
    if value <= 0:
        raise _bad(expr, pos, "a baseline factor is above 0 (1.5x baseline)")
    return "factor", value


def with_baseline(slos: Sequence[SLO], baseline: Mapping[str, float | None]) -> list[SLO]:
    """Each baseline SLO with its threshold computed from ``baseline`` (metric name → the
    baseline's value); a metric the baseline lacks leaves ``baseline_value`` None and the
    SLO breaches when judged (``evaluate``). Fixed SLOs pass through."""
    out = []
    for slo in slos:
        if slo.baseline is None:
            out.append(slo)
            continue
        base = baseline.get(slo.metric)
        if base is None or not math.isfinite(base):
            out.append(replace(slo, baseline_value=None, threshold=0.0))
            continue
        threshold = base * slo.amount if slo.baseline == "factor" else base + slo.amount
        out.append(replace(slo, baseline_value=base, threshold=threshold))
    return out


def _families() -> str:
    """The names an SLO may use, in one short line."""
    metrics = "|".join(METRICS)
    return f"<{metrics}>_<{'|'.join(STATS)}>, {', '.join(_PLAIN)}"


def _in_unit(
    expr: str,
    at: tuple[int, int],
    name: str,
    number: float,
    unit: str,
    *,
    ratio_check: bool = True,
) -> float:
    """The threshold in the metric's own unit (ms for times, a 0..1 ratio for error_rate);
    ``at`` is where the number and the unit start, for the caret."""
    at_number, at_unit = at
    kind = unit_of(name)
    if kind == "ms":
        factors = {"": 1.0, "ms": 1.0, "s": 1000.0}
        if unit not in factors:
            raise _bad(expr, at_unit, f"unit {unit!r}: {name} takes ms or s (a bare number is ms)")
        return number * factors[unit]
    if kind == "ratio":
        if unit == "%":
            number /= 100.0
        elif unit:
            raise _bad(
                expr, at_unit, f"unit {unit!r}: error_rate is a ratio (0.05) or a percentage (5%)"
            )
        if ratio_check and not 0.0 <= number <= 1.0:
            raise _bad(expr, at_number, "error_rate is between 0 and 1 (or 0% and 100%)")
        return number
    if unit:
        raise _bad(expr, at_unit, f"unit {unit!r}: {name} takes a bare number")
    return number


def evaluate(
    slos: Sequence[SLO], values: Mapping[str, float | None], *, concurrency: int | None = None
) -> list[SLOResult]:
    """Judge each SLO against ``values`` (metric name → measured value).

    A value nothing measured (a TLS time over plain http, tokens/s of runs that all
    failed) breaches: an SLO that cannot be checked must not pass a CI gate."""
    results = []
    for slo in slos:
        value = values.get(slo.metric)
        unresolved = slo.baseline is not None and slo.baseline_value is None
        ok = (
            not unresolved
            and value is not None
            and math.isfinite(value)
            and _OPS[slo.op](value, slo.threshold)
        )
        results.append(SLOResult(slo=slo, value=value, ok=ok, concurrency=concurrency))
    return results

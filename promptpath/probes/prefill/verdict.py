"""The prefill probe's verdict: the fit of TTFT against prompt length, and the cache check.

Pure: measured samples in, one Finding out. The time to first token from the request,
less one round trip (core/rtt.py), is split into a part that does not grow with the
prompt (the fit's intercept: gateway, queue, anything fixed) and one that does (its slope:
prefill, ms per 1,000 input tokens). Intervals are t-based (fit.py) from the repeats.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.prefill.fit import Line, fit_line

__all__ = ["PROBE", "CacheSample", "Sample", "judge"]

PROBE = "prefill"
#: The slope's 95 % half-width, as a share of the slope, wider than which "too wide to tell".
WIDE = 0.25
#: The fixed part "dominates" above this share of TTFT at the largest size ...
DOMINANT = 0.5
#: ... and "varies" when the fit's residuals spread more than this share of it: a queue.
VARIES = 0.2
#: A cached repeat must be this much shorter (ms, and at least 2 residual SDs) to count.
CACHE_FLOOR_MS = 5.0
#: The shortest and longest of the minimum lengths (tokens) of a marked prefix that the
#: APIs caching only what is marked will cache, by model (Anthropic's prompt-caching docs:
#: 1,024 for most Claude models, 2,048 for the Haikus 3 and 3.5, 4,096 for Opus 4.5 and
#: Haiku 4.5; Bedrock's are the same models').
MARK_MINIMUMS = (1024, 4096)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One request of the fit."""

    size: int  # the prompt size asked for (input tokens, estimated): its group of repeats
    input_tokens: int
    estimated: bool  # input_tokens estimated from the prompt (the API reported no usage)
    adjusted_ms: float  # TTFT from the request less one round trip
    rtt_ms: float | None  # the round trip subtracted (None: not adjusted, see rtt_note)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSample:
    """One repeat of the longest prompt, its prefix sent before."""

    input_tokens: int
    cached_tokens: int | None  # as the dialect's usage field says; None: it said nothing
    adjusted_ms: float


def wire_words_ms(ms: float) -> str:
    """A round trip: whole ms, or two decimals under 1 ms (loopback)."""
    return f"{ms:,.0f}" if ms >= 10 else f"{ms:.2f}" if ms < 1 else f"{ms:.1f}"


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _k(tokens: float) -> str:
    return f"{tokens / 1000:.0f}k" if tokens >= 1000 else f"{tokens:.0f}"


def _fit_evidence(line: Line, estimated: bool) -> dict[str, object]:
    return {
        "fixed_ms": round(line.intercept, 2),
        "fixed_ci95_ms": round(line.intercept_hw, 2),
        "slope_ms_per_1k": round(line.slope * 1000, 3),
        "slope_ci95_ms_per_1k": round(line.slope_hw * 1000, 3),
        "r2": None if line.r2 is None else round(line.r2, 4),
        "residual_sd_ms": round(line.residual_sd, 2),
        "n": line.n,
        "interval": "t-based, 95 %",
        "input_tokens_source": "estimated" if estimated else "usage",
    }


def judge(
    samples: Sequence[Sample],
    cache: Sequence[CacheSample],
    *,
    repeats: int,
    rtt_note: str | None = None,
    cache_mark: str | None = None,
) -> Finding:
    """The finding for the fit's ``samples`` and the ``cache`` repeats; ``cache_mark``:
    the mark the requests put on their prefix (an API that caches only what is marked)."""
    ok = [s for s in samples if math.isfinite(s.adjusted_ms)]
    line = fit_line([float(s.input_tokens) for s in ok], [s.adjusted_ms for s in ok])
    if line is None:
        return Finding(
            probe=PROBE,
            verdict=Verdict.SKIP,
            summary=f"too few first tokens to fit ({len(ok)} of {len(samples)} requests"
            " gave one, at fewer than two prompt sizes)",
            evidence={"samples": len(ok)},
        )
    estimated = any(s.estimated for s in ok)
    # The repeats of the largest size asked for: a tokeniser may count each one's fresh
    # line a token or two apart, so they are grouped by the size, not by the count.
    at_largest = [s for s in ok if s.size == max(s.size for s in ok)]
    largest = max(s.input_tokens for s in at_largest)
    rtts = [s.rtt_ms for s in ok if s.rtt_ms is not None]
    wire = statistics.median(rtts) if rtts else None
    grows = line.slope * largest
    ttft = statistics.median(s.adjusted_ms for s in at_largest) + (wire or 0.0)
    label = " (estimated)" if estimated else ""
    wire_words = f"{wire_words_ms(wire)} ms wire" if wire is not None else "wire not measured"
    slope_words = f"{line.slope * 1000:.1f} ± {line.slope_hw * 1000:.1f} ms per 1k tokens"
    grows_words = (
        f"{_n(grows)} ms grows with the prompt (prefill, {slope_words})"
        if line.slope - line.slope_hw > 0
        else f"nothing measurably grows with the prompt ({slope_words})"
    )
    summary = (
        f"of {_n(ttft)} ms TTFT at {_k(largest)} tokens{label}: {wire_words},"
        f" {_n(line.intercept)} ms fixed (gateway and queue) ± {_n(line.intercept_hw)},"
        f" {grows_words}"
    )
    evidence: dict[str, object] = {
        "fit": _fit_evidence(line, estimated),
        "largest_input_tokens": largest,
        "ttft_at_largest_ms": round(ttft, 2),
        "wire_ms": None if wire is None else round(wire, 3),
        "samples": [
            {"input_tokens": s.input_tokens, "adjusted_ms": round(s.adjusted_ms, 3)} for s in ok
        ],
    }
    if rtt_note:
        evidence["rtt_note"] = rtt_note
    verdict = Verdict.PASS
    advice: list[str] = []
    fixed_share = line.intercept / ttft if ttft > 0 else 0.0
    if fixed_share > DOMINANT and line.intercept > 0 and line.residual_sd > VARIES * line.intercept:
        verdict = Verdict.WARN
        summary += (
            f"; the fixed part is {fixed_share:.0%} of TTFT and varies by"
            f" ±{_n(line.residual_sd)} ms from request to request: a queue"
        )
        advice.append("a fixed part that varies is waiting, not computing: a gateway or queue")
    if line.slope <= 0 or line.slope_hw > WIDE * abs(line.slope):
        verdict = Verdict.WARN
        need = _repeats_needed(line, repeats)
        more = f"about {need} repeats per size would" if need else "more repeats would"
        summary += f"; the spread is too wide to tell the prefill slope: {more}"
        advice.append(f"--prefill-repeats {need or repeats * 4} (or larger --prefill-sizes)")
    cache_verdict, cache_words, cache_evidence = _cache(cache, line, at_largest, cache_mark)
    evidence["cache"] = cache_evidence
    if cache_words:
        summary += "; " + cache_words
    if cache_verdict is Verdict.WARN:
        verdict = Verdict.WARN
        advice.append("put the stable part of a prompt first: prefix caches match from the start")
    return Finding(probe=PROBE, verdict=verdict, summary=summary, evidence=evidence, advice=advice)


def _repeats_needed(line: Line, repeats: int) -> int | None:
    """Repeats per size for the slope's interval to come within WIDE of it (the
    half-width shrinks with the square root of the number of points)."""
    if line.slope <= 0:
        return None
    ratio = line.slope_hw / (WIDE * line.slope)
    return max(repeats + 1, math.ceil(repeats * ratio * ratio))


def _cache(
    cache: Sequence[CacheSample], line: Line, at_largest: Sequence[Sample], mark: str | None
) -> tuple[Verdict, str, dict[str, object]]:
    if not cache:
        return Verdict.PASS, "", {"repeats": 0, "mark": mark}
    reported = [c.cached_tokens for c in cache if c.cached_tokens is not None]
    best = max(reported, default=0)
    before = statistics.median(s.adjusted_ms for s in at_largest)
    after = statistics.median(c.adjusted_ms for c in cache)
    shorter = before - after
    floor = max(CACHE_FLOOR_MS, 2 * line.residual_sd)
    evidence: dict[str, object] = {
        "repeats": len(cache),
        "cached_tokens": [c.cached_tokens for c in cache],
        "input_tokens": cache[0].input_tokens,
        "ttft_uncached_ms": round(before, 2),
        "ttft_cached_ms": round(after, 2),
        "shorter_ms": round(shorter, 2),
        "mark": mark,
    }
    if best <= 0:
        said = "reported 0 cached tokens" if reported else "reported no cached tokens"
        # A marked prefix shorter than the model's minimum is not cached, mark or no mark.
        marked = (
            f", though marked with {mark}: a marked prefix is cached only from a minimum"
            f" length, {_n(MARK_MINIMUMS[0])}-{_n(MARK_MINIMUMS[1])} tokens by model"
            if mark
            else ""
        )
        return (
            Verdict.WARN,
            f"prefix cache: a repeated prefix of {_n(cache[0].input_tokens)} tokens was never"
            f" cached (the API {said}; TTFT {_signed(shorter)}){marked}",
            evidence,
        )
    if shorter < floor:
        return (
            Verdict.WARN,
            f"prefix cache: {_n(best)} of {_n(cache[0].input_tokens)} tokens cached, but"
            f" TTFT not shorter ({_signed(shorter)}, floor {floor:.0f} ms)",
            evidence,
        )
    return (
        Verdict.PASS,
        f"prefix cache works: {_n(best)} of {_n(cache[0].input_tokens)} tokens cached on"
        f" the repeat, TTFT {_n(shorter)} ms shorter",
        evidence,
    )


def _signed(ms: float) -> str:
    """``150 ms shorter`` / ``12 ms longer``."""
    return f"{abs(ms):,.0f} ms {'shorter' if ms >= 0 else 'longer'}"

"""The prefill probe's pure parts: the line fit, its verdict's words, the prompts, and the
reference endpoint's prefix cache (server/prefill.py)."""

from __future__ import annotations

import random
import re

import pytest

from promptpath.core.findings import Verdict
from promptpath.probes.prefill.fit import fit_line, t95
from promptpath.probes.prefill.prompts import estimate_tokens, prompt_of
from promptpath.probes.prefill.verdict import CacheSample, Sample, judge
from promptpath.server.prefill import PrefixCache, prefill_ms, tokens_of_words


def test_the_fit_recovers_a_known_line_and_its_interval_covers_it() -> None:
    rng = random.Random(7)
    xs = [256.0, 1024.0, 4096.0] * 5
    ys = [260 + 0.115 * x + rng.gauss(0, 3) for x in xs]
    line = fit_line(xs, ys)
    assert line is not None
    assert abs(line.slope - 0.115) <= line.slope_hw
    assert abs(line.intercept - 260) <= line.intercept_hw
    assert line.r2 is not None and line.r2 > 0.99
    assert line.n == 15


def test_no_fit_from_one_size_or_two_points() -> None:
    assert fit_line([1000.0] * 4, [1.0, 2.0, 3.0, 4.0]) is None
    assert fit_line([1.0, 2.0], [1.0, 2.0]) is None


def test_t_quantiles_are_students() -> None:
    assert t95(1) == 12.706 and t95(7) == 2.365 and t95(30) == 2.042
    assert 1.96 < t95(200) < 1.98


def _samples(fixed: float, slope_per_1k: float, noise: float, repeats: int = 3) -> list[Sample]:
    rng = random.Random(3)
    out = []
    for _ in range(repeats):
        for size in (256, 1024, 8192):
            y = fixed + slope_per_1k * size / 1000 + rng.gauss(0, noise)
            out.append(
                Sample(size=size, input_tokens=size, estimated=False, adjusted_ms=y, rtt_ms=38.0)
            )
    return out


def test_the_finding_says_where_the_time_goes_and_that_the_cache_works() -> None:
    samples = _samples(260, 115, 2)
    cache = [CacheSample(input_tokens=8192, cached_tokens=8064, adjusted_ms=280.0)] * 2
    finding = judge(samples, cache, repeats=3)
    assert finding.verdict is Verdict.PASS, finding.summary
    # The example, give or take the seeded noise (±2 ms a point).
    assert re.match(
        r"of 1,2[34]\d ms TTFT at 8k tokens: 38 ms wire, 2[56]\d ms fixed \(gateway and queue\)"
        r" ± \d, 9[34]\d ms grows with the prompt \(prefill, 11[45]\.\d ± 0\.\d ms per 1k tokens\)",
        finding.summary,
    ), finding.summary
    assert "prefix cache works: 8,064 of 8,192 tokens cached" in finding.summary


def test_a_prefix_never_cached_is_a_warning_naming_what_the_api_said() -> None:
    samples = _samples(260, 115, 2)
    unreported = [CacheSample(input_tokens=8192, cached_tokens=None, adjusted_ms=1200.0)] * 2
    finding = judge(samples, unreported, repeats=3)
    assert finding.verdict is Verdict.WARN
    assert "was never cached (the API reported no cached tokens" in finding.summary
    zero = [CacheSample(input_tokens=8192, cached_tokens=0, adjusted_ms=1200.0)] * 2
    assert "reported 0 cached tokens" in judge(samples, zero, repeats=3).summary


def test_cached_tokens_without_a_shorter_ttft_are_a_warning() -> None:
    samples = _samples(260, 115, 2)
    cache = [CacheSample(input_tokens=8192, cached_tokens=8064, adjusted_ms=1199.0)] * 2
    finding = judge(samples, cache, repeats=3)
    assert finding.verdict is Verdict.WARN
    assert "8,064 of 8,192 tokens cached, but TTFT not shorter" in finding.summary


def test_a_fixed_part_that_dominates_and_varies_is_called_a_queue() -> None:
    finding = judge(_samples(900, 5, 400), [], repeats=3)
    assert finding.verdict is Verdict.WARN
    assert ": a queue" in finding.summary
    assert "nothing measurably grows with the prompt" in finding.summary


def test_too_wide_a_spread_says_how_many_repeats_would_settle_it() -> None:
    finding = judge(_samples(200, 10, 60), [], repeats=3)
    assert finding.verdict is Verdict.WARN
    assert "the spread is too wide to tell the prefill slope: about" in finding.summary
    assert "repeats per size would" in finding.summary


def test_estimated_input_tokens_are_labelled() -> None:
    samples = [
        Sample(
            size=s.size,
            input_tokens=s.input_tokens,
            estimated=True,
            adjusted_ms=s.adjusted_ms,
            rtt_ms=None,
        )
        for s in _samples(260, 115, 2)
    ]
    finding = judge(samples, [], repeats=3)
    assert "tokens (estimated): wire not measured" in finding.summary
    assert finding.evidence["fit"]["input_tokens_source"] == "estimated"  # type: ignore[index]


def test_too_few_first_tokens_skip() -> None:
    one = [Sample(size=256, input_tokens=256, estimated=False, adjusted_ms=200.0, rtt_ms=None)]
    assert judge(one, [], repeats=1).verdict is Verdict.SKIP


@pytest.mark.parametrize("size", [256, 1024, 3072, 8192])
def test_prompts_are_the_size_asked_and_new_after_the_fixed_prefix(size: int) -> None:
    first, second = prompt_of(size), prompt_of(size)
    assert abs(estimate_tokens(first) - size) <= 2
    assert first != second
    assert first.split("\n")[0] == second.split("\n")[0]  # the fixed prefix
    assert first.split("\n")[1] != second.split("\n")[1]  # the line new every time


def test_prefix_cache_matches_whole_blocks_from_the_start_only() -> None:
    cache = PrefixCache(block_words=4)
    words = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    assert cache.lookup_and_remember(words) == 0  # seen for the first time
    assert cache.lookup_and_remember(words) == 8  # two whole blocks; "i j" is no block
    assert cache.lookup_and_remember(["a", "b", "c", "d", "X", "f", "g", "h"]) == 4
    assert (
        cache.lookup_and_remember(["Z", "b", "c", "d", "e", "f", "g", "h"]) == 0
    )  # from the start only


def test_prefix_cache_memory_is_bounded_least_recent_out() -> None:
    cache = PrefixCache(block_words=1, max_blocks=5)
    cache.lookup_and_remember(list("abcdefgh"))
    assert len(cache) == 5
    assert cache.lookup_and_remember(list("abc")) == 0  # its first blocks went out first


def test_prefill_delay_counts_only_what_the_cache_did_not_hold() -> None:
    assert prefill_ms(40.0, 8000, 0) == 320.0
    assert prefill_ms(40.0, 8000, 6000) == 80.0
    assert tokens_of_words(48) == 64 and tokens_of_words(0) == 0


def test_the_largest_sizes_repeats_are_grouped_by_size_when_their_counts_differ() -> None:
    # A tokeniser that counts each repeat's fresh line a token or two apart; the repeat
    # counted longest was also the slowest. The uncached figure is the median of all three.
    samples = [
        Sample(size=size, input_tokens=size + extra, estimated=False, adjusted_ms=y, rtt_ms=38.0)
        for size, extra, y in (
            (256, 0, 290.0),
            (256, 1, 290.0),
            (256, 2, 291.0),
            (1024, 0, 378.0),
            (1024, 1, 377.0),
            (1024, 2, 378.0),
            (8192, 0, 1200.0),
            (8192, 1, 1201.0),
            (8192, 2, 1500.0),
        )
    ]
    cache = [CacheSample(input_tokens=8192, cached_tokens=8064, adjusted_ms=280.0)] * 2
    finding = judge(samples, cache, repeats=3)
    assert finding.evidence["cache"]["ttft_uncached_ms"] == 1201.0  # type: ignore[index]

"""The prefill probe's cache mark: where the APIs that cache only a marked prefix
(Anthropic's ``cache_control``, Converse's ``cachePoint``) get it in the body each plug-in
builds, that the others get the prompt whole, and how the reference endpoint's emulation
reads the mark (server/prefill.py). Pure: bodies and the cache, no sockets.

Without the mark the emulation caches nothing for these dialects
(``test_an_unmarked_body_is_never_cached``), so the integration test
(test_prefill_probe.py's marked test) fails when a plug-in stops marking; this file says
which plug-in and where.
"""

from __future__ import annotations

from typing import Any

import pytest

from promptpath.core.findings import Verdict
from promptpath.dialects.plugins import dialect, dialects
from promptpath.dialects.spec import DialectSpec
from promptpath.options import RunOptions, Target
from promptpath.probes.prefill.prompts import QUESTION, cache_prefix, prompt_of
from promptpath.probes.prefill.verdict import CacheSample, Sample, judge
from promptpath.server.dialect import Dialect
from promptpath.server.prefill import MIN_MARKED_TOKENS, PrefixCache, cache_tokens

TARGET = Target(url="http://127.0.0.1:1/", scheme="http", host="127.0.0.1", port=1, path="/")
MARKS = {"anthropic": "cache_control", "bedrock-invoke": "cache_control", "bedrock": "cachePoint"}


def _options(spec: DialectSpec, prompt: str, *, marked: bool) -> RunOptions:
    return RunOptions(
        target=TARGET,
        provider=spec.name,
        model="m",
        prompt=prompt,
        cache_prefix=cache_prefix(prompt) if marked else 0,
    )


def _content(body: dict[str, object]) -> list[Any]:
    messages: Any = body["messages"]
    [message] = messages
    content = message["content"]
    assert isinstance(content, list), content
    return content


def test_the_plugins_that_need_a_mark_declare_it() -> None:
    declared = {s.name: s.cache_mark for s in dialects() if s.cache_mark is not None}
    assert declared == MARKS


@pytest.mark.parametrize("name", ["anthropic", "bedrock-invoke"])
def test_anthropic_bodies_mark_everything_before_the_question(name: str) -> None:
    spec = dialect(name)  # type: ignore[arg-type]
    assert spec.body is not None
    prompt = prompt_of(3072, nonce="n0nce")
    content = _content(spec.body(_options(spec, prompt, marked=True)))
    assert content == [
        {"type": "text", "text": prompt[: -len(QUESTION)], "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": QUESTION},
    ]
    # The fresh line is inside the mark: a fit request's marked prefix is its own.
    assert "Note set n0nce." in content[0]["text"]
    assert spec.body(_options(spec, prompt, marked=False))["messages"] == [
        {"role": "user", "content": prompt}
    ]


def test_converse_body_puts_a_cache_point_after_the_prefix() -> None:
    spec = dialect("bedrock")
    assert spec.body is not None
    prompt = prompt_of(3072, nonce="n0nce")
    content = _content(spec.body(_options(spec, prompt, marked=True)))
    assert content == [
        {"text": prompt[: -len(QUESTION)]},
        {"cachePoint": {"type": "default"}},
        {"text": QUESTION},
    ]
    assert _content(spec.body(_options(spec, prompt, marked=False))) == [{"text": prompt}]


def test_the_apis_that_cache_by_themselves_get_the_prompt_whole() -> None:
    prompt = prompt_of(1024)
    for spec in dialects():
        if spec.body is None or spec.cache_mark is not None:
            continue
        marked = spec.body(_options(spec, prompt, marked=True))
        assert marked == spec.body(_options(spec, prompt, marked=False)), spec.name


def _emulation(name: str) -> type[Dialect]:
    from promptpath.dialects.plugins import emulation

    return emulation(name)  # type: ignore[arg-type]


def _read_written(cache: PrefixCache, name: str, prompt: str, *, marked: bool) -> tuple[int, int]:
    spec = dialect(name)  # type: ignore[arg-type]
    assert spec.body is not None
    body = spec.body(_options(spec, prompt, marked=marked))
    emulation = _emulation(name)
    return cache_tokens(cache, emulation, body, emulation.parse_request(body).prompt_tokens)


@pytest.mark.parametrize("name", sorted(MARKS))
def test_the_fit_writes_and_only_the_repeats_read(name: str) -> None:
    cache = PrefixCache()
    longest = prompt_of(3072)
    read, written = _read_written(cache, name, longest, marked=True)
    assert read == 0 and written > 3000  # the fit's request: a write
    # Another request of the fit, the same size: its fresh line makes its prefix its own.
    assert _read_written(cache, name, prompt_of(3072), marked=True)[0] == 0
    # A prompt under the minimum is not cached, marked or not.
    assert _read_written(cache, name, prompt_of(256), marked=True) == (0, 0)
    # The repeat, byte for byte: the whole marked prefix read, nothing written.
    assert _read_written(cache, name, longest, marked=True) == (written, 0)


@pytest.mark.parametrize("name", sorted(MARKS))
def test_an_unmarked_body_is_never_cached(name: str) -> None:
    cache = PrefixCache()
    prompt = prompt_of(3072)
    assert _read_written(cache, name, prompt, marked=False) == (0, 0)
    assert _read_written(cache, name, prompt, marked=False) == (0, 0)
    assert len(cache) == 0  # nothing remembered for the next either


def test_an_automatic_cache_ignores_the_mark_field() -> None:
    cache = PrefixCache()
    prompt = prompt_of(3072)
    assert _read_written(cache, "openai", prompt, marked=True) == (0, 0)
    read, written = _read_written(cache, "openai", prompt, marked=True)
    assert read > 3000 and written == 0


def test_read_marked_reads_the_longest_remembered_mark() -> None:
    words = [f"w{i}" for i in range(2000)]
    short, long = 800, 1600  # 1,067 and 2,134 tokens: both over the minimum
    assert MIN_MARKED_TOKENS == 1024
    cache = PrefixCache()
    assert cache.read_marked(words, [short]) == (0, short)
    # Two marks, the shorter remembered: it is read, the rest up to the longer written.
    assert cache.read_marked(words, [short, long]) == (short, long - short)
    assert cache.read_marked(words, [short, long]) == (long, 0)
    # A mark under the minimum (700 words, 934 tokens) is no mark.
    assert PrefixCache().read_marked(words, [700]) == (0, 0)
    changed = ["X", *words[1:]]
    assert cache.read_marked(changed, [long]) == (0, long)


def test_read_marked_memory_is_bounded() -> None:
    cache = PrefixCache(max_blocks=3)
    for i in range(10):
        cache.read_marked([f"p{i}", *(["w"] * 900)], [901])
    assert len(cache) == 3


def _fit() -> list[Sample]:
    return [
        Sample(size=s, input_tokens=s, estimated=False, adjusted_ms=200 + 0.04 * s, rtt_ms=1.0)
        for _ in range(3)
        for s in (256, 1024, 3072)
    ]


def test_a_marked_prefix_never_cached_names_the_mark_and_the_minimum() -> None:
    never = [CacheSample(input_tokens=3072, cached_tokens=0, adjusted_ms=323.0)] * 2
    finding = judge(_fit(), never, repeats=3, cache_mark="cache_control")
    assert finding.verdict is Verdict.WARN
    assert "was never cached" in finding.summary
    assert "though marked with cache_control" in finding.summary
    assert "1,024-4,096 tokens by model" in finding.summary
    assert finding.evidence["cache"]["mark"] == "cache_control"  # type: ignore[index]
    unmarked = judge(_fit(), never, repeats=3)
    assert "marked" not in unmarked.summary
    assert unmarked.evidence["cache"]["mark"] is None  # type: ignore[index]

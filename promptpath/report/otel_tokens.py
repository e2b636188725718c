"""The token counts of a run document as the GenAI conventions count them (report/otel.py).

Pure: reads ``tokens`` of the JSON report (the provider's own ``usage``, else the content
events counted) and its word on what the input count includes (``usage.cached_apart``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final


def tokens(run: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(input, output) tokens: the provider's own counts, else output counted from the
    content events; input only when the provider reported it."""
    counts = run.get("tokens") or {}
    usage = counts.get("usage") or {}
    reported_in = usage.get("input_tokens")
    reported_out = usage.get("output_tokens")
    input_tokens = reported_in if isinstance(reported_in, int) else None
    if isinstance(reported_out, int):
        return input_tokens, reported_out
    counted = counts.get("count")
    return input_tokens, counted if isinstance(counted, int) and counted > 0 else None


#: The subsets of the usage a dialect may report (tokens.usage in the run document), with
#: the latest conventions' span attribute and counter role for each.
SUBSETS: Final = (
    ("cached_input_tokens", "gen_ai.usage.cache_read.input_tokens", "usage.cache_read"),
    ("cache_write_input_tokens", "gen_ai.usage.cache_write.input_tokens", "usage.cache_write"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens", "usage.reasoning"),
)


def subsets(run: Mapping[str, Any]) -> dict[str, int]:
    """The usage subsets the provider reported (cache reads and writes, reasoning), by
    their key in tokens.usage; a count it did not send is absent, never 0."""
    usage = (run.get("tokens") or {}).get("usage") or {}
    out: dict[str, int] = {}
    for key, _attr, _role in SUBSETS:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[key] = value
    return out


def with_cache(
    run: Mapping[str, Any], input_tokens: int | None, subsets: Mapping[str, int]
) -> int | None:
    """The input count the latest conventions mean ("including cached tokens"): an API
    whose count leaves the prompt cache out (Anthropic's, Bedrock's: ``tokens.usage.
    cached_apart``, as the dialect's decoder said) gets the cache's reads and writes added;
    any other's is already whole."""
    usage = (run.get("tokens") or {}).get("usage") or {}
    if input_tokens is None or usage.get("cached_apart") is not True:
        return input_tokens
    cached = ("cached_input_tokens", "cache_write_input_tokens")
    return input_tokens + sum(subsets.get(key, 0) for key in cached)


__all__ = ["SUBSETS", "subsets", "tokens", "with_cache"]

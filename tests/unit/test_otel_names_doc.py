"""docs/otel.md's table of every name in both settings, held to report/otel_names.py, and
the switch between the settings (OTEL_SEMCONV_STABILITY_OPT_IN, --otel-semconv)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from promptpath.core.errors import UsageError
from promptpath.outputs.otlp import pick_semconv
from promptpath.report import otel
from promptpath.report.otel_names import (
    INSTRUMENTS,
    SEMCONVS,
    SPAN_ATTRIBUTES,
    TOKEN_MODALITY,
    TOKEN_TYPE,
    semconv_from,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "otel.md"


def _table() -> dict[str, dict[str, str]]:
    """The rows of the 'Two settings' table: name -> kind, unit, default, latest."""
    text = DOC.read_text()
    section = text.split("## Two settings of the GenAI names", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, dict[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        rows[name] = {
            "kind": cells[1],
            "unit": cells[2].strip("`"),
            "default": cells[3],
            "latest": cells[4],
        }
    return rows


def _code_names(semconv: str) -> dict[str, tuple[str, str]]:
    """name -> (kind, unit) of everything the setting sends that differs between them."""
    names = {i.name: (i.kind, i.unit) for i in INSTRUMENTS[semconv].values()}  # type: ignore[index]
    for attr in SPAN_ATTRIBUTES[semconv]:  # type: ignore[index]
        names[attr] = ("span attribute", "")
    names[TOKEN_TYPE if semconv == "default" else TOKEN_MODALITY] = ("metric attribute", "")
    return names


@pytest.mark.parametrize("semconv", SEMCONVS)
def test_the_docs_table_lists_every_name_each_setting_sends(semconv: str) -> None:
    table = _table()
    documented = {name for name, row in table.items() if row[semconv] == "yes"}
    assert documented == set(_code_names(semconv))
    for name, (kind, unit) in _code_names(semconv).items():
        assert table[name]["kind"].startswith(kind), name
        assert table[name]["unit"] == unit, name


def test_every_row_of_the_table_is_sent_by_some_setting() -> None:
    sent = set(_code_names("default")) | set(_code_names("latest"))
    assert set(_table()) == sent


def test_the_histograms_buckets_are_the_ones_the_table_names() -> None:
    table = _table()
    for semconv in SEMCONVS:
        for instrument in INSTRUMENTS[semconv].values():
            if instrument.kind != "histogram":
                continue
            first = re.search(r"buckets ([0-9.]+)", table[instrument.name]["kind"])
            assert first is not None and float(first.group(1)) == instrument.buckets[0]
            last = instrument.buckets[-1]
            shown = str(int(last)) if float(last).is_integer() else str(last)
            assert table[instrument.name]["kind"].endswith(f"… {shown}"), instrument.name


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "default"),
        ("http", "default"),
        ("gen_ai_latest_experimental", "latest"),
        ("http/dup, gen_ai_latest_experimental ,database", "latest"),
        ("gen_ai_latest_experimentalx", "default"),
        ("gen_ai/dup", "default"),  # not defined by the conventions: not ours either
    ],
)
def test_the_variable_turns_the_latest_names_on_only_when_it_lists_the_value(
    value: str, expected: str
) -> None:
    assert semconv_from({"OTEL_SEMCONV_STABILITY_OPT_IN": value}) == expected


def test_the_option_wins_over_the_variable_and_a_typo_is_a_usage_error() -> None:
    latest = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
    assert pick_semconv("default", latest) == "default"
    assert pick_semconv("latest", {}) == "latest"
    assert pick_semconv(None, latest) == "latest"
    with pytest.raises(UsageError, match="--otel-semconv wants default or latest"):
        pick_semconv("newest", {})


def _run(**usage: int | bool) -> dict[str, object]:
    return {
        "ok": True,
        "started_unix_ns": 1_700_000_000_000_000_000,
        "target": {
            "url": "https://api.example.test/v1/chat/completions",
            "host": "api.example.test",
            "port": 443,
            "provider": "openai",
            "model": "gpt-4o",
        },
        "status": 200,
        "ttft_ms": {"from_start": 250.0},
        "tokens": {"count": 3, "gaps": [10.0, 20.0], "usage": usage or None},
        "spans_ms": [{"stage": "connect", "start": 0.0, "end": 5.0}],
    }


def _by_name(recordings: tuple[otel.Recording, ...]) -> dict[str, list[otel.Recording]]:
    out: dict[str, list[otel.Recording]] = {}
    for r in recordings:
        out.setdefault(r.instrument.name, []).append(r)
    return out


def test_latest_names_the_counters_with_the_reported_subsets_only() -> None:
    tele = otel.run_telemetry(_run(input_tokens=11, output_tokens=7, reasoning_tokens=4), "latest")
    got = _by_name(tele.recordings)
    assert got["gen_ai.client.inference.usage.input_tokens"][0].value == 11
    assert got["gen_ai.client.inference.usage.output_tokens"][0].value == 7
    assert got["gen_ai.client.inference.usage.reasoning.output_tokens"][0].value == 4
    # No cache count was reported: no cache counter (a 0 would say "none were cached").
    assert "gen_ai.client.inference.usage.cache_read.input_tokens" not in got
    assert got["gen_ai.client.inference.operation.output_tokens"][0].value == 7
    assert [r.value for r in got["gen_ai.client.inference.time_per_output_chunk"]] == [0.01, 0.02]
    assert got["gen_ai.client.inference.time_to_first_chunk"][0].value == 0.25
    counter = got["gen_ai.client.inference.usage.input_tokens"][0]
    assert counter.attributes["gen_ai.token.modality"] == "unknown"
    assert not any(name.startswith("gen_ai.client.operation.") for name in got)
    assert "gen_ai.client.token.usage" not in got
    assert tele.root.attributes["gen_ai.usage.reasoning.output_tokens"] == 4
    assert "gen_ai.usage.cache_read.input_tokens" not in tele.root.attributes


def test_latest_records_zero_tokens_for_a_failed_operation_without_error_type_on_counters() -> None:
    run = _run()
    run.update(ok=False, status=None, error={"kind": "timeout", "message": "deadline"})
    run["tokens"] = {"count": 0, "gaps": []}
    got = _by_name(otel.run_telemetry(run, "latest").recordings)
    usage = got["gen_ai.client.inference.usage.output_tokens"][0]
    assert usage.value == 0 and "error.type" not in usage.attributes
    histogram = got["gen_ai.client.inference.operation.output_tokens"][0]
    assert histogram.value == 0 and histogram.attributes["error.type"] == "timeout"
    assert got["gen_ai.client.inference.duration"][0].attributes["error.type"] == "timeout"


def test_default_is_unchanged_by_the_subsets() -> None:
    tele = otel.run_telemetry(_run(input_tokens=11, output_tokens=7, reasoning_tokens=4))
    got = _by_name(tele.recordings)
    assert set(got) == {
        "gen_ai.client.operation.duration",
        "gen_ai.client.operation.time_to_first_chunk",
        "gen_ai.client.operation.time_per_output_chunk",
        "gen_ai.client.token.usage",
        "promptpath.stage.duration",
    }
    assert "gen_ai.usage.reasoning.output_tokens" not in tele.root.attributes


def test_cache_counts_in_a_report_reach_the_latest_counters_and_span() -> None:
    run = _run(input_tokens=100, output_tokens=5, cached_input_tokens=80)
    tele = otel.run_telemetry(run, "latest")
    got = _by_name(tele.recordings)
    assert got["gen_ai.client.inference.usage.cache_read.input_tokens"][0].value == 80
    assert tele.root.attributes["gen_ai.usage.cache_read.input_tokens"] == 80
    assert "gen_ai.client.inference.usage.cache_write.input_tokens" not in got


def test_the_prompt_caches_counts_are_read_where_the_dialect_reports_them() -> None:
    """Anthropic counts cache reads and writes apart from input_tokens; OpenAI counts its
    cached_tokens inside prompt_tokens (their API references; the recorded streams in
    tests/data/streams carry both shapes)."""
    from promptpath.core.timeline import Usage
    from promptpath.dialects.anthropic import _cached_usage
    from promptpath.streams.dialect_base import _usage

    anthropic = {
        "input_tokens": 12,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 40,
    }
    assert _cached_usage(anthropic, 7) == Usage(
        input_tokens=12,
        output_tokens=7,
        cached_input_tokens=900,
        cache_write_input_tokens=40,
        cached_apart=True,
    )
    impossible = _usage(1, 2, cached=-5)
    assert impossible is not None and impossible.untrusted == ("cached_input_tokens",)


@pytest.mark.parametrize(("apart", "expected_input"), [(True, 952), (False, 12)])
def test_latest_counts_the_cache_in_the_input_as_the_conventions_mean_it(
    apart: bool, expected_input: int
) -> None:
    """Anthropic's and Bedrock's input count leaves the cache out (their decoders say
    ``cached_apart``): the latest conventions' input adds it; OpenAI's already holds it."""
    run = _run(
        input_tokens=12,
        output_tokens=7,
        cached_input_tokens=900,
        cache_write_input_tokens=40,
        cached_apart=apart,
    )
    latest = otel.run_telemetry(run, "latest")
    got = _by_name(latest.recordings)
    assert got["gen_ai.client.inference.usage.input_tokens"][0].value == expected_input
    assert got["gen_ai.client.inference.usage.cache_read.input_tokens"][0].value == 900
    assert got["gen_ai.client.inference.usage.cache_write.input_tokens"][0].value == 40
    assert latest.root.attributes["gen_ai.usage.input_tokens"] == expected_input
    assert latest.root.attributes["gen_ai.usage.cache_write.input_tokens"] == 40
    # The default setting is unchanged: the input as the provider counted it.
    default = otel.run_telemetry(run)
    assert default.root.attributes["gen_ai.usage.input_tokens"] == 12

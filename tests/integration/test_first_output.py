"""first_output over real sockets: serve sends reasoning, pauses, then the answer's text;
the trace's first_output follows the injected pause, in every channel that carries ttft.

serve's reasoning control (checked by hand first, cohere and openai dialects): with
``reasoning: 4, pause-after: 4, pause-s: 0.8`` at 50 tokens/s the first text arrived
882 ms after the first reasoning token (4 x 20 ms of cadence + the 0.8 s pause).

Anthropic and Responses (checked by hand with anthropic 2.15.0 and openai 3.57.0's stream
helpers against serve, ``reasoning: 3`` of 6 tokens): the anthropic SDK's final message is
a ``thinking`` block (with the signature from its ``signature_delta``) then a ``text``
block; the openai SDK's final response is a ``reasoning`` item whose summary holds the
reasoning, then the message, ``output_text`` the answer alone and
``output_tokens_details.reasoning_tokens`` 3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import jsonschema
import openai
import pytest
from haralyzer import HarParser
from prometheus_client.parser import text_string_to_metric_families

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.refserver import RefServer, reference_server
from tests.integration.test_series_cli import validate_series

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
PATHS = {
    "openai": "/v1/chat/completions",
    "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    "ollama": "/api/chat",
    "cohere": "/v2/chat",
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
}
REASONING = 3


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    # rate 0: the reasoning tokens go out at once, so the gap is the pause alone.
    with reference_server(
        tls=False, tmp_path=tmp_path_factory.mktemp("first-output"), extra_args=["--rate", "0"]
    ) as server:
        yield server


def run(ref: RefServer, dialect: str, pause_s: float, *args: str) -> CliResult:
    controls = {
        "tokens": 8,
        "reasoning": REASONING,
        "pause-after": REASONING,
        "pause-s": pause_s,
    }
    headers = [a for k, v in controls.items() for a in ("-H", f"x-promptpath-{k}: {v}")]
    return run_cli("run", ref.url + PATHS[dialect], "--json", *headers, *args)


def body_of(res: CliResult) -> dict[str, Any]:
    assert res.exit_code == ExitCode.OK, res.stderr
    body: dict[str, Any] = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return body


@pytest.mark.parametrize("dialect", sorted(PATHS))
def test_reasoning_before_text_puts_first_output_after_ttft_by_the_pause(
    ref: RefServer, dialect: str
) -> None:
    body = body_of(run(ref, dialect, 0.3))
    out = body["first_output_ms"]
    assert out["after"] == "reasoning"
    # The pause is the server's floor between its two sends; what we measure moves from it
    # by how late each read was. A loaded machine mostly adds to it, but a reasoning event
    # read late (our thread waiting for a CPU) shortens it: fresh-clone CI read 266 and 283
    # ms. So the floor gives way by our own measured wait for a CPU, and no more.
    waited = body["stream"]["cpu_wait_ms"] or 0.0
    assert out["after_ttft"] >= 290 - waited, (out, waited)
    assert out["from_start"] == body["milestones_ms"]["first_output"]
    assert out["from_start"] - body["ttft_ms"]["from_start"] == pytest.approx(
        out["after_ttft"], abs=0.01
    )
    assert body["tokens"]["content_types"] == {"reasoning": REASONING, "text": 8 - REASONING}
    assert "after the first reasoning" in body["headline"]


def test_the_difference_follows_the_injected_delay(ref: RefServer) -> None:
    short = body_of(run(ref, "cohere", 0.2))["first_output_ms"]["after_ttft"]
    long = body_of(run(ref, "cohere", 0.8))["first_output_ms"]["after_ttft"]
    # 0.6 s more pause: the lead grows by about that (generous for a loaded machine).
    assert 500 <= long - short <= 1000, (short, long)


def test_the_terminal_says_by_how_much(ref: RefServer) -> None:
    res = run_cli(
        "run",
        ref.url + PATHS["openai"],
        "-H",
        f"x-promptpath-reasoning: {REASONING}",
        "-H",
        f"x-promptpath-pause-after: {REASONING}",
        "-H",
        "x-promptpath-pause-s: 0.3",
    )
    assert res.exit_code == ExitCode.OK, res.stderr
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("OUTPUT"))
    assert "after the first reasoning" in line


def test_exports_and_slos_carry_first_output(ref: RefServer, tmp_path: Path) -> None:
    prom, har = tmp_path / "pp.prom", tmp_path / "run.har"
    res = run(
        ref,
        "openai",
        0.3,
        "--prom-textfile",
        str(prom),
        "--har",
        str(har),
        "--slo",
        "first_output_p95<100ms",
        "--slo",
        "ttft_p95<250ms",
    )
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    # ttft (the reasoning) is quick; the answer's first text is 300 ms later: only the
    # first_output SLO fails.
    verdicts = {v["metric"]: v["ok"] for v in body["slo"]}
    assert verdicts == {"first_output_p95": False, "ttft_p95": True}, body["slo"]
    assert res.exit_code != ExitCode.OK
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    # A summary, as promptpath_ttft_seconds is: one run's value at every quantile.
    medians = [
        s.value
        for s in families["promptpath_first_output_seconds"].samples
        if s.labels.get("quantile") == "0.5"
    ]
    assert medians == [pytest.approx(body["first_output_ms"]["from_start"] / 1000, rel=1e-3)]
    (entry,) = HarParser(json.loads(har.read_text())).har_data["entries"]
    assert entry["_promptpath"]["first_output_ms"] == body["first_output_ms"]


def test_a_series_aggregates_first_output(ref: RefServer) -> None:
    res = run(ref, "ollama", 0.2, "--count", "2")
    assert res.exit_code == ExitCode.OK, res.stderr
    body = json.loads(res.stdout)
    validate_series(body)  # the run schema from the file, never fetched by its $id
    agg = body["aggregate"]["first_output_ms"]
    assert agg["n"] == 2 and agg["min"] >= 190


SDK_CONTROLS = {"x-promptpath-reasoning": "3", "x-promptpath-tokens": "6"}


def test_the_anthropic_sdk_reads_serves_reasoning_as_a_thinking_block(ref: RefServer) -> None:
    client = anthropic.Anthropic(base_url=ref.url, api_key="k", default_headers=SDK_CONTROLS)
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        deltas = [e.delta.type for e in stream if e.type == "content_block_delta"]
        message = stream.get_final_message()
    assert deltas == ["thinking_delta"] * 3 + ["signature_delta"] + ["text_delta"] * 3
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking and thinking.signature
    assert text.type == "text" and text.text and text.text not in thinking.thinking
    assert message.usage.output_tokens == 6


def test_the_openai_sdk_reads_serves_reasoning_as_a_summary_item(ref: RefServer) -> None:
    client = openai.OpenAI(base_url=ref.url + "/v1", api_key="k", default_headers=SDK_CONTROLS)
    with client.responses.stream(model="gpt-5", input="hi") as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert kinds.count("response.reasoning_summary_text.delta") == 3
    assert kinds.count("response.output_text.delta") == 3
    reasoning, message = final.output
    assert reasoning.type == "reasoning" and message.type == "message"
    summary = "".join(part.text for part in reasoning.summary)
    assert summary and final.output_text and final.output_text not in summary
    assert final.usage is not None and final.usage.output_tokens_details.reasoning_tokens == 3

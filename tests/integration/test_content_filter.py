"""The buffering probe in canary mode names Azure OpenAI's content filter when the
deliveries follow the filter's verdicts, and gives a non-Azure stream with the same
timing no such name.

serve's filter-batch control, checked by hand first: with ``filter-batch: 10`` under the
probe's 60-token, 20 tokens/s canary stream, the Azure dialect wrote 6 batches of 10
tokens about 500 ms apart, each followed by a content_filter_results chunk whose
content_filter_offsets cover the batch's characters; the OpenAI dialect with the same
control wrote the same batches with no verdict (the probe then found a flush timer).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
AZURE = "/openai/deployments/prod-gpt/chat/completions?api-version=2024-10-21"
OPENAI = "/v1/chat/completions"


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("filter")) as server:
        yield server


def buffering(ref: RefServer, path: str, *headers: str) -> dict[str, Any]:
    args = ["probe", ref.url + path, "buffering", "--canary", "--json", "--as", "identity"]
    for header in headers:
        args += ["-H", header]
    res = run_cli(*args)
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    (finding,) = [f for f in body["findings"] if f["probe"] == "buffering"]
    return dict(finding)


@pytest.fixture(scope="module")
def azure(ref: RefServer) -> dict[str, Any]:
    return buffering(ref, AZURE, "x-promptpath-filter-batch: 10")


def test_azure_batches_are_named_the_provider_s_content_filter(azure: dict[str, Any]) -> None:
    mechanism = azure["evidence"]["mechanism"]
    assert mechanism["kind"] == "content_filter", azure["summary"]
    assert mechanism["batches"] >= 5 and mechanism["events_per_batch"]["median"] == 10
    assert mechanism["asynchronous_filter_changes_it"] is True
    assert azure["verdict"] in ("warn", "fail")
    assert "content filter, not a proxy" in azure["summary"]
    assert "Asynchronous Filter" in azure["summary"]


def test_the_filter_is_not_blamed_on_a_hop(azure: dict[str, Any]) -> None:
    assert "blamed_hop" not in azure["evidence"]
    assert "a hop between you and the origin" not in azure["summary"]
    (advice,) = azure["advice"]
    assert advice.startswith("Azure OpenAI:") and "nginx" not in advice


def test_a_non_azure_stream_with_the_same_timing_is_not_given_that_name(ref: RefServer) -> None:
    finding = buffering(ref, OPENAI, "x-promptpath-filter-batch: 10")
    assert finding["verdict"] in ("warn", "fail")
    assert finding["evidence"]["mechanism"]["kind"] != "content_filter"
    assert "content filter" not in finding["summary"]


def test_azure_streaming_token_by_token_passes(ref: RefServer) -> None:
    # Without the batches (the Asynchronous Filter's way): one verdict at the end only.
    finding = buffering(ref, AZURE)
    assert finding["verdict"] == "pass", finding["summary"]
    assert finding["evidence"]["mechanism"] is None

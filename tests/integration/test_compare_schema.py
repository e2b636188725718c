"""Whole ``--compare-http`` JSON outputs against promptpath/report/compare-schema.json.

The compare schema takes its run objects from the run schema (schema.json) by ``$id``; both
are read as the installed package ships them, and joined in a ``referencing`` registry.
"""

from __future__ import annotations

import copy
import json
import socket
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from promptpath.options import RunOptions, parse_target
from promptpath.report.compare_http import compare_json
from promptpath.tracer import trace_pair
from tests.helpers.refserver import RefServer, reference_server

CHAT = "/v1/chat/completions"


def _schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        resources.files("promptpath.report").joinpath(name).read_text()
    )
    return loaded


def _validator() -> jsonschema.Draft202012Validator:
    run = Resource.from_contents(_schema("schema.json"))
    registry: Registry[Any] = Registry().with_resource(run.id() or "", run)
    return jsonschema.Draft202012Validator(_schema("compare-schema.json"), registry=registry)


def _options(server: RefServer, *, timeout: float = 10.0) -> RunOptions:
    return RunOptions(
        target=parse_target(f"https://localhost:{server.port}{CHAT}"),
        provider="openai",
        model="test-model",
        http="auto",
        cacert=server.ca,
        family=socket.AF_INET,  # the endpoint listens on 127.0.0.1 only
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def h3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True, http3=True, tmp_path=tmp_path_factory.mktemp("compare-schema")
    ) as srv:
        assert srv.http3, "the reference endpoint did not bind UDP for HTTP/3"
        yield srv


def test_compare_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(_schema("compare-schema.json"))


async def test_compare_output_with_both_protocols_validates(h3_server: RefServer) -> None:
    body = compare_json(await trace_pair(_options(h3_server)))
    assert body["ok"] is True, body["results"]
    _validator().validate(json.loads(json.dumps(body)))


async def test_compare_output_with_http3_failing_validates(tmp_path: Path) -> None:
    # No UDP listener: HTTP/3 fails in quic_handshake, its fields are null, its error set.
    with reference_server(tls=True, http3=False, tmp_path=tmp_path) as srv:
        results = await trace_pair(_options(srv, timeout=3.0))
    body = json.loads(json.dumps(compare_json(results)))
    assert body["ok"] is False and body["results"][1]["error"]["stage"] == "quic_handshake"
    assert body["differences"]["ttft_ms"]["better"] is None
    _validator().validate(body)


async def test_compare_output_with_both_runs_failing_validates_and_picks_no_winner() -> None:
    # TCP refused and UDP silent on one port: both handshakes fail, neither time counts.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))  # bound, never read: datagrams vanish
        port = silent.getsockname()[1]
        opts = RunOptions(
            target=parse_target(f"https://127.0.0.1:{port}{CHAT}"),
            provider="openai",
            model="test-model",
            family=socket.AF_INET,
            timeout=2.0,
        )
        results = await trace_pair(opts)
    body = json.loads(json.dumps(compare_json(results)))
    _validator().validate(body)
    assert body["ok"] is False
    assert [r["error"]["stage"] for r in body["results"]] == ["connect", "quic_handshake"]
    for key, diff in body["differences"].items():
        assert (diff["http2"], diff["http3"], diff["delta"], diff["better"]) == (
            None,
            None,
            None,
            None,
        ), key
    assert body["summary"][0].startswith("HTTP/2 failed in connect (refused)")
    assert body["summary"][1].startswith("HTTP/3 failed in quic_handshake")
    assert not any("less than" in line for line in body["summary"])


async def test_runs_are_checked_against_the_run_schema(h3_server: RefServer) -> None:
    good = json.loads(json.dumps(compare_json(await trace_pair(_options(h3_server)))))
    _validator().validate(good)
    broken_run = copy.deepcopy(good)
    del broken_run["results"][1]["tls"]  # required by the run schema, not by this one
    with pytest.raises(jsonschema.ValidationError, match="'tls' is a required property"):
        _validator().validate(broken_run)
    measured_trips = copy.deepcopy(good)
    measured_trips["differences"]["setup_round_trips"]["measured"] = True
    with pytest.raises(jsonschema.ValidationError):
        _validator().validate(measured_trips)
    missing_floor = copy.deepcopy(good)
    del missing_floor["differences"]["ttft_ms"]["noise_floor"]
    with pytest.raises(jsonschema.ValidationError):
        _validator().validate(missing_floor)


async def test_first_output_is_compared_beside_ttft_and_follows_the_reasoning(
    h3_server: RefServer,
) -> None:
    # serve sends 3 reasoning tokens, pauses 0.3 s, then the answer: on both protocols the
    # first text comes at least the pause after the first token of any kind.
    controls = (("x-promptpath-reasoning", "3"), ("x-promptpath-pause-after", "3"))
    options = _options(h3_server).derive(headers=(*controls, ("x-promptpath-pause-s", "0.3")))
    body = json.loads(json.dumps(compare_json(await trace_pair(options))))
    _validator().validate(body)
    assert body["ok"] is True, body["results"]
    out, ttft = body["differences"]["first_output_ms"], body["differences"]["ttft_ms"]
    assert out["label"] == "first output (from start)"
    for side in ("http2", "http3"):
        assert out[side] is not None and ttft[side] is not None, (out, ttft)
        assert out[side] - ttft[side] >= 290, (side, out, ttft)
    for run in body["results"]:  # each run's own first_output_ms agrees with the difference row
        assert run["first_output_ms"]["after"] == "reasoning"
    assert body["differences"]["first_output_from_request_ms"]["http2"] is not None

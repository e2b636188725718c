"""The exporter's fleet labels: the vantage (config, --label) on every sample, and the edge
as a bounded info metric; read back by the official client's parser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.errors import UsageError
from promptpath.exporter.labels import (
    OTHER,
    UNKNOWN,
    EdgeLabels,
    check_labels,
    edge_of,
    static_labels,
)
from promptpath.exporter.metrics import (
    GuardState,
    Health,
    ProcessState,
    Served,
    health_text,
    probe_text,
)
from promptpath.exporter.probe import Outcome
from promptpath.outputs.deliver import parse_labels
from tests.helpers.exporterlab import samples

SAMPLE = json.loads((Path(__file__).parents[2] / "examples" / "sample-run.json").read_text())


def _with_edge(name: object, cdn: object = "cloudflare") -> dict[str, Any]:
    server = {**SAMPLE["server"], "edge_name": {"name": name, "cdn": cdn, "header": "cf-ray"}}
    return {**SAMPLE, "server": server}


def _served(report: dict[str, Any]) -> Served:
    outcome = Outcome(
        report=report,
        success=True,
        duration_s=1.0,
        deadline_s=9.5,
        timed_out_in=None,
        failed_stage=None,
        exit_code=0,
    )
    return Served(outcome=outcome, cached=False)


def test_edge_of_reads_server_edge_name_and_skips_older_documents() -> None:
    assert edge_of(_with_edge("FRA")) == ("FRA", "cloudflare")
    assert edge_of(SAMPLE) == (None, None)  # no edge_name: a document from before it
    assert edge_of({**SAMPLE, "server": {**SAMPLE["server"], "edge_name": None}}) == (None, None)
    assert edge_of({"server": None}) == (None, None)


def test_edge_labels_are_a_bounded_set() -> None:
    edges = EdgeLabels(cap=2)
    assert edges.labels(SAMPLE) == {"edge": UNKNOWN, "cdn": UNKNOWN}
    assert edges.labels(_with_edge("FRA")) == {"edge": "FRA", "cdn": "cloudflare"}
    assert edges.labels(_with_edge("AMS")) == {"edge": "AMS", "cdn": "cloudflare"}
    # The third distinct pair is past the cap; the ones seen keep their names.
    assert edges.labels(_with_edge("LHR")) == {"edge": OTHER, "cdn": OTHER}
    assert edges.labels(_with_edge("FRA")) == {"edge": "FRA", "cdn": "cloudflare"}
    assert edges.named == 2


@pytest.mark.parametrize("name", ["FRA\n", 'a"b', "x" * 33, "-lead", "", "ü", "a b", "\u202eFRA"])
def test_an_edge_name_that_is_not_a_short_token_is_other(name: str) -> None:
    got = EdgeLabels().labels(_with_edge(name))
    assert got == (
        {"edge": UNKNOWN, "cdn": UNKNOWN} if name == "" else {"edge": OTHER, "cdn": OTHER}
    )


def test_the_vantage_and_labels_go_on_every_sample_of_a_probe_answer() -> None:
    labels = static_labels("eu-west-1a", [("site", "office")])
    text = probe_text(_served(_with_edge("FRA")), labels, {"edge": "FRA", "cdn": "cloudflare"})
    got = samples(text)
    for name, found in got.items():
        for sample_labels, _value in found:
            assert sample_labels.get("vantage") == "eu-west-1a", name
            assert sample_labels.get("site") == "office", name
    (edge,) = got["promptpath_edge"]
    assert edge[0]["edge"] == "FRA" and edge[0]["cdn"] == "cloudflare" and edge[1] == 1.0
    # The edge is on its info metric only: a stage series does not split when it changes.
    assert all("edge" not in s for s, _ in got["promptpath_stage_duration_seconds"])


def test_a_label_from_the_command_line_wins_over_the_configs_vantage() -> None:
    assert static_labels("config", [("vantage", "cli")]) == (("vantage", "cli"),)
    assert static_labels(None, []) == ()


def test_the_vantage_goes_on_the_exporters_own_metrics() -> None:
    text = health_text(
        Health(),
        GuardState(in_flight=0, max_in_flight=4, budgets={}),
        ProcessState(
            open_fds=None, max_fds=None, resident_bytes=None, cpu_seconds=0, start_unix=0, tasks=1
        ),
        version="0",
        pairs=[("api", "chat")],
        labels=(("vantage", "lab"),),
    )
    for name, found in samples(text).items():
        assert all(s.get("vantage") == "lab" for s, _ in found), name


@pytest.mark.parametrize("name", ["edge", "cdn", "module", "instance", "le"])
def test_the_exporter_refuses_a_label_it_sets_itself(name: str) -> None:
    with pytest.raises(UsageError, match=f"--label {name}: the exporter sets"):
        check_labels(parse_labels([f"{name}=x"]))


def test_run_label_checks_apply_to_the_exporter_too() -> None:
    with pytest.raises(UsageError, match="not a Prometheus label name"):
        check_labels(parse_labels(["1bad=x"]))
    with pytest.raises(UsageError, match="sets that label itself"):
        check_labels(parse_labels(["target=x"]))


_CONFIG = """
[exporter]
{extra}

[modules.chat]
provider = "openai"

[targets.lab]
url = "http://127.0.0.1:9/v1/chat/completions"
"""


def _config(tmp_path: Path, extra: str) -> Any:
    from promptpath.exporter.config import load

    path = tmp_path / "exporter.toml"
    path.write_text(_CONFIG.format(extra=extra))
    return load(path, {"OPENAI_API_KEY": "sk-test-not-a-key"})


def test_the_config_names_the_vantage_and_the_edge_cap(tmp_path: Path) -> None:
    config = _config(tmp_path, 'vantage = "eu-west-1a"\nmax_edges = 4')
    assert config.vantage == "eu-west-1a" and config.max_edges == 4
    config = _config(tmp_path, "")
    assert config.vantage is None and config.max_edges == 16


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('vantage = ""', "[exporter] vantage must be 1 to 128 printable"),
        ('vantage = "a\\nb"', "[exporter] vantage must be 1 to 128 printable"),
        ("vantage = 3", "vantage"),
        ("max_edges = 0", "[exporter] max_edges must be 1 to 1000"),
    ],
)
def test_a_bad_vantage_or_edge_cap_names_the_key(tmp_path: Path, extra: str, said: str) -> None:
    with pytest.raises(UsageError, match=None) as caught:
        _config(tmp_path, extra)
    assert said in caught.value.message and caught.value.kind == "bad_config"

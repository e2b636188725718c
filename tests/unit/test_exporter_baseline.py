"""A module's baseline in the exporter: the config reads it (relative to the config file),
a bad one fails the load naming the module, and each probe answer carries
promptpath_baseline_ratio{metric}, read back by the official client's parser."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from promptpath.core.errors import UsageError
from promptpath.exporter.config import load
from promptpath.exporter.metrics import RATIO_METRICS, Served, probe_text
from tests.helpers.exporterlab import samples
from tests.unit.test_exporter_text import SAMPLE, _outcome

CONFIG = """
[modules.chat]
provider = "openai"
max_tokens = 8
baseline = "{baseline}"

[targets.lab]
url = "http://127.0.0.1:9/v1/chat/completions"
"""


def _baseline_series(tmp_path: Path, ttft_ms: float) -> Path:
    runs = []
    for i in range(5):
        run = copy.deepcopy(SAMPLE)
        run["ttft_ms"]["from_start"] = ttft_ms + i  # median: ttft_ms + 2
        runs.append(run)
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"schema": "promptpath.series/1", "runs": runs}))
    return path


def test_each_probe_answer_divides_its_figures_by_the_baselines_medians(tmp_path: Path) -> None:
    _baseline_series(tmp_path, 180.0)
    config_path = tmp_path / "exporter.toml"
    config_path.write_text(CONFIG.format(baseline="baseline.json"))
    config = load(config_path, {})
    probe = config.probe("lab", "chat")
    assert probe is not None and probe.baseline is not None
    assert probe.baseline["ttft_p50"] == 182.0
    text = probe_text(Served(outcome=_outcome(), cached=False, baseline=probe.baseline))
    ratios = {
        labels["metric"]: value for labels, value in samples(text)["promptpath_baseline_ratio"]
    }
    # The sample run's TTFT is 362.692 ms against the baseline's 182 ms.
    assert ratios["ttft"] == pytest.approx(362.692 / 182.0, rel=1e-6)
    assert ratios["connect"] == pytest.approx(1.0)  # the same connect in every run
    assert set(ratios) <= set(RATIO_METRICS) and "quic_handshake" not in ratios


def test_without_a_baseline_the_answer_has_no_ratio() -> None:
    assert "promptpath_baseline_ratio" not in probe_text(Served(outcome=_outcome(), cached=True))


def test_a_baseline_that_is_no_promptpath_document_fails_the_load(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"schema": "promptpath.run/9"}')
    config_path = tmp_path / "exporter.toml"
    config_path.write_text(CONFIG.format(baseline="bad.json"))
    with pytest.raises(UsageError, match=r"module 'chat' baseline: .*unknown schema version"):
        load(config_path, {})

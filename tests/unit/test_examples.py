"""The files in examples/ stay true to the code."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from promptpath.plan.profiles import load_profile

ROOT = Path(__file__).parents[2]


def test_sample_json_validates_against_the_schema() -> None:
    schema = json.loads((ROOT / "promptpath/report/schema.json").read_text())
    jsonschema.validate(json.loads((ROOT / "examples/sample-run.json").read_text()), schema)


def test_example_profiles_load() -> None:
    path = ROOT / "examples/config.toml"
    for name in ("prod-openai", "prod-anthropic", "gateway"):
        assert load_profile(name, path)["url"].startswith("https://")


def test_the_schema_is_a_valid_json_schema() -> None:
    schema = json.loads((ROOT / "promptpath/report/schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_schema_rejects_a_run_missing_a_required_field() -> None:
    import pytest

    schema = json.loads((ROOT / "promptpath/report/schema.json").read_text())
    run = json.loads((ROOT / "examples/sample-run.json").read_text())
    del run["tokens"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(run, schema)

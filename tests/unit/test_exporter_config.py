"""The exporter's TOML config: modules and targets resolved as profiles are, every problem
one message naming the file, the table and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptpath.core.errors import UsageError
from promptpath.exporter.config import load

EXAMPLE = Path(__file__).parents[2] / "examples" / "exporter" / "exporter.toml"

BASE = """
[exporter]
max_in_flight = 3
min_interval_s = 30
daily_token_budget = 1000
otlp_endpoint = "http://127.0.0.1:4318"

[modules.chat]
provider = "anthropic"
model = "claude-x"
max_tokens = 8
timeout = 5
headers = { "x-team" = "sre" }

[modules.path]
provider = "openai"
probes = ["tls", "buffering"]

[targets.prod]
url = "https://llm.example.test/v1/messages"
resolve = ["llm.example.test:443:127.0.0.1"]
modules = ["chat"]
min_interval_s = 5

[targets.lab]
url = "http://127.0.0.1:9/v1/chat/completions"
"""


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "exporter.toml"
    path.write_text(text)
    return load(path, {"ANTHROPIC_API_KEY": "sk-ant-secret-value"})


def test_pairs_are_resolved_as_profiles_with_the_targets_path_and_the_modules_request(
    tmp_path: Path,
) -> None:
    config = _load(tmp_path, BASE)
    assert sorted(config.probes) == [  # type: ignore[attr-defined]
        ("lab", "chat"),
        ("lab", "path"),
        ("prod", "chat"),
    ]
    prod = config.probe("prod", "chat")  # type: ignore[attr-defined]
    trace = prod.plan.trace
    assert (trace.provider, trace.model, trace.max_tokens, trace.timeout) == (
        "anthropic",
        "claude-x",
        8,
        5,
    )
    assert ("x-team", "sre") in trace.headers
    assert trace.resolve == (("llm.example.test", 443, "127.0.0.1"),)
    assert trace.api_key == "sk-ant-secret-value"  # from the environment, never the file
    assert prod.tokens == 8
    path = config.probe("lab", "path")  # type: ignore[attr-defined]
    assert [p.name for p in path.plan.probes] == ["tls", "buffering"]
    assert path.tokens > path.plan.trace.max_tokens  # the buffering probe's own tokens
    targets = config.targets  # type: ignore[attr-defined]
    assert targets["prod"].min_interval_s == 5 and targets["lab"].min_interval_s == 30
    assert targets["lab"].daily_token_budget == 1000
    assert config.max_in_flight == 3  # type: ignore[attr-defined]
    assert config.otlp_endpoint == "http://127.0.0.1:4318"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("[targets.lab]", "[targets.lab]\nbogus = 1"), "target 'lab' has unknown key 'bogus'"),
        (("max_tokens = 8", "max_tokens = '8'"), "module 'chat' key 'max_tokens' has the wrong"),
        (("max_in_flight = 3", "max_in_flight = 0"), "max_in_flight must be 1 to 1000"),
        (('modules = ["chat"]', 'modules = ["nope"]'), "names the module 'nope'"),
        (('probes = ["tls", "buffering"]', 'probes = ["nope"]'), "unknown probe 'nope'"),
        (('provider = "openai"', 'provider = "nope"'), "--provider must be one of"),
        (("[exporter]", "[exporter]\napi_key = 'x'"), "[exporter] has unknown key 'api_key'"),
        (("[modules.chat]", "[modules.chat]\napi_key = 'sk'"), "unknown key 'api_key'"),
        (('otlp_endpoint = "http', 'otlp_endpoint = "ftp'), "otlp_endpoint wants http(s)"),
        (('"http://127.0.0.1:4318"', '"http://[::1"'), "otlp_endpoint is not a valid URL"),
        # RecursionError from tomllib, exit 70, before.
        (
            ("[targets.lab]", "[targets.x]\nm = " + "[" * 5000 + "]" * 5000 + "\n[targets.lab]"),
            "nested too deeply",
        ),
        (("min_interval_s = 5", "min_interval_s = -1"), "min_interval_s must be between"),
    ],
)
def test_a_bad_config_is_one_usage_error_naming_where(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    assert change[0] in BASE
    with pytest.raises(UsageError) as caught:
        _load(tmp_path, BASE.replace(change[0], change[1], 1))
    assert message in caught.value.message
    assert str(tmp_path / "exporter.toml") in caught.value.message
    assert caught.value.exit_code == 2
    assert "sk-ant-secret-value" not in caught.value.message


def test_no_targets_or_not_toml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no \[targets\.NAME\]"):
        _load(tmp_path, BASE.split("[targets.prod]")[0])
    with pytest.raises(UsageError, match="cannot read config"):
        _load(tmp_path, "[exporter\n")


def test_the_shipped_example_loads(tmp_path: Path) -> None:
    # Its gateway target names a CA file that exists only where it is deployed: point it
    # at a real bundle; everything else is loaded as shipped.
    import certifi

    text = EXAMPLE.read_text().replace("/etc/promptpath/gateway-ca.pem", certifi.where())
    config = _load(tmp_path, text)
    assert set(config.targets) == {"openai", "gateway"}  # type: ignore[attr-defined]
    assert ("gateway", "path") not in config.probes  # type: ignore[attr-defined]

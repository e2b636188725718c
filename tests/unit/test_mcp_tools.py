"""The MCP tools' table (promptpath/mcpserver/tools.py): each input schema made from the
CLI's option table, the arguments checked against it, the allow-list's URL matching, and
the SDK left unloaded until `promptpath mcp` serves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.errors import UsageError
from promptpath.exporter.config import ExporterConfig, Target
from promptpath.mcpserver.jobs import Session, _url_key
from promptpath.mcpserver.tools import (
    PROBE_OPTIONS,
    TOOLS,
    TRACE_OPTIONS,
    checked,
    input_schema,
    option_schema,
    spec_of,
)
from promptpath.plan.flags import BY_DEST
from promptpath.probes.catalog import NAMES

#: Options that would send packets elsewhere, choose the credential, write files or
#: weaken TLS: never a tool argument (the config's alone).
NEVER = (
    "api_key_env", "header", "resolve", "connect_to", "proxy", "noproxy", "proxy_user",
    "resolver", "authoritative", "canary_admin", "otlp_endpoint", "pushgateway", "cacert",
    "insecure", "cert", "key", "allow_cleartext", "json_out", "html", "junit", "config",
)  # fmt: skip


@pytest.mark.parametrize("spec", TOOLS, ids=lambda s: s.name)
def test_every_option_property_is_the_tables_row(spec: Any) -> None:
    schema = input_schema(spec)
    jsonschema.Draft202012Validator.check_schema(schema)
    for dest in spec.options:
        flag = BY_DEST[dest]
        prop = schema["properties"][dest]
        assert prop == option_schema(flag)
        assert prop["description"] == f"{flag.decls[0]}: {flag.help}"
    assert not set(schema["properties"]) & set(NEVER)


def test_choices_come_from_the_rows_and_the_probes_from_the_catalog() -> None:
    assert option_schema(BY_DEST["http"])["enum"] == ["1.1", "2", "3", "auto"]
    assert option_schema(BY_DEST["probe"])["items"]["enum"] == [*NAMES, "all"]
    assert option_schema(BY_DEST["tls_warn_days"])["minimum"] == 0
    assert option_schema(BY_DEST["max_tokens"])["type"] == "integer"
    assert option_schema(BY_DEST["timeout"])["type"] == "number"
    assert set(TRACE_OPTIONS) | set(PROBE_OPTIONS) <= set(BY_DEST)


def test_arguments_are_checked_and_never_quoted_back() -> None:
    trace = spec_of("trace", TOOLS)
    assert checked(trace, {"target": "ref", "max_tokens": 8}) == {"target": "ref", "max_tokens": 8}
    secret = "sk-do-not-echo-0123456789"
    with pytest.raises(UsageError, match="takes no argument 'api_key'") as caught:
        checked(trace, {"target": "ref", "api_key": secret})
    assert secret not in caught.value.message
    with pytest.raises(UsageError, match="target is missing"):
        checked(trace, {})
    with pytest.raises(UsageError, match="http is not one of the choices") as caught:
        checked(trace, {"target": "ref", "http": secret})
    assert secret not in caught.value.message
    with pytest.raises(UsageError, match="max_tokens must be integer"):
        checked(trace, {"target": "ref", "max_tokens": "many"})
    with pytest.raises(UsageError, match="no tool 'shell'"):
        spec_of("shell", TOOLS)


def _session(**targets: str) -> Session:
    config = ExporterConfig(
        path=Path("/etc/promptpath/mcp.toml"),
        targets={
            name: Target(
                name=name,
                url=url,
                modules=frozenset({"chat"}),
                min_interval_s=0,
                daily_token_budget=0,
            )
            for name, url in targets.items()
        },
        modules=("chat",),
        probes={},
    )
    return Session(config, {})


@pytest.mark.parametrize(
    "given",
    [
        "prod",
        "https://api.example.test/v1/chat/completions",
        "HTTPS://API.example.test:443/v1/chat/completions/",
    ],
)
def test_a_target_is_its_name_or_its_url(given: str) -> None:
    session = _session(prod="https://api.example.test/v1/chat/completions")
    assert session.target(given).name == "prod"


@pytest.mark.parametrize(
    "given",
    [
        "https://api.example.test:8443/v1/chat/completions",  # another port
        "https://api.example.test/v1/messages",  # another path
        "http://api.example.test/v1/chat/completions",  # another scheme
        "https://user:pw@api.example.test/v1/chat/completions",  # userinfo: never a match
        "https://api.example.test.evil.test/v1/chat/completions",
        "other",
        "https://[::1",
    ],
)
def test_anything_else_is_not_allowed_and_no_userinfo_is_quoted(given: str) -> None:
    session = _session(prod="https://api.example.test/v1/chat/completions")
    with pytest.raises(UsageError) as caught:
        session.target(given)
    assert caught.value.kind == "not_allowed"
    assert "pw" not in caught.value.message
    assert "/etc/promptpath/mcp.toml" in caught.value.message


def test_url_keys_fill_the_default_port_and_drop_a_trailing_slash() -> None:
    assert _url_key("https://H.test/a/") == _url_key("https://h.test:443/a")
    assert _url_key("https://h.test/a?x=1") != _url_key("https://h.test/a?x=2")
    assert _url_key("not a url") is None


def test_the_sdk_loads_only_when_the_server_serves() -> None:
    """`promptpath --help`, `run` and the MCP command's own table stay free of the SDK
    (and of what it brings: starlette, pydantic); only mcpserver/server.py imports it."""
    code = (
        "import sys, promptpath.cli.faces, promptpath.cli.commands\n"
        "import promptpath.mcpserver.run, promptpath.mcpserver.tools\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}"
        " & {'mcp', 'mcp_types', 'starlette', 'pydantic', 'jsonschema'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout

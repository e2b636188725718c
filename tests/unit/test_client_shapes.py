"""--as: the request copies a real client's headers and HTTP version; -H still wins."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.errors import UsageError
from promptpath.options import ClientName, RunOptions, parse_target
from promptpath.report.json import client_json
from promptpath.tracer.request import SHAPES, offered_encodings, prepare, sent_request


def _opts(client: ClientName, provider: str = "openai", **kw: object) -> RunOptions:
    return RunOptions(
        target=parse_target("https://h/v1/chat/completions"),
        provider=provider,  # type: ignore[arg-type]
        model="m",
        client=client,
        **kw,  # type: ignore[arg-type]
    )


def _shown(options: RunOptions) -> dict[str, object]:
    """The client object of --json, from the request as the tracer records it."""
    return client_json(options, sent_request(options, prepare(options)))


OLLAMA_UA = (
    f"ollama-python/0.6.1 ({platform.machine()} {platform.system().lower()})"
    f" Python/{platform.python_version()} promptpath/0.1"
)
GENAI = f"google-genai-sdk/3.6.1 gl-python/{platform.python_version()}"
CHROME_UA = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)"
    " Chrome/142.0.0.0 Safari/537.36 promptpath/0.1"
)


@pytest.mark.parametrize(
    ("client", "provider", "expected"),
    [
        (
            "openai-python",
            "openai",
            [
                ("content-type", "application/json"),
                ("accept", "application/json"),
                ("accept-encoding", "gzip, deflate"),
                ("user-agent", "OpenAI/Python 3.57.0 promptpath/0.1"),
                ("authorization", "Bearer sk-1"),
            ],
        ),
        (
            "anthropic-python",
            "anthropic",
            [
                ("content-type", "application/json"),
                ("accept", "application/json"),
                ("accept-encoding", "gzip, deflate"),
                ("user-agent", "Anthropic/Python 2.14.0 promptpath/0.1"),
                ("anthropic-version", "2023-06-01"),
                ("x-api-key", "sk-1"),
            ],
        ),
        (
            "ollama-python",
            "ollama",
            [
                ("content-type", "application/json"),
                ("accept", "application/json"),
                ("accept-encoding", "gzip, deflate"),
                ("user-agent", OLLAMA_UA),
                ("authorization", "Bearer sk-1"),
            ],
        ),
        (
            "google-genai",
            "gemini",
            [
                ("content-type", "application/json"),
                ("accept", "*/*"),
                ("accept-encoding", "gzip, deflate"),
                ("user-agent", f"{GENAI} promptpath/0.1"),
                ("x-goog-api-client", GENAI),
                ("x-goog-api-key", "sk-1"),
            ],
        ),
        (
            "google-genai",
            "vertex",
            [
                ("content-type", "application/json"),
                ("accept", "*/*"),
                ("accept-encoding", "gzip, deflate"),
                ("user-agent", f"{GENAI} promptpath/0.1"),
                ("x-goog-api-client", GENAI),
                ("authorization", "Bearer sk-1"),
            ],
        ),
        (
            "cohere",
            "cohere",
            [
                ("content-type", "application/json"),
                ("accept", "*/*"),
                ("accept-encoding", "gzip, deflate"),
                ("user-agent", "cohere/7.3.1 promptpath/0.1"),
                ("x-fern-language", "Python"),
                ("x-fern-sdk-name", "cohere"),
                ("x-fern-sdk-version", "7.3.1"),
                ("authorization", "Bearer sk-1"),
            ],
        ),
        (
            "openai-python",
            "azure",
            [
                ("content-type", "application/json"),
                ("accept", "application/json"),
                ("accept-encoding", "gzip, deflate"),
                ("user-agent", "OpenAI/Python 3.57.0 promptpath/0.1"),
                ("api-key", "sk-1"),
            ],
        ),
        (
            "curl",
            "openai",
            [  # curl sends no Accept-Encoding unless told --compressed
                ("content-type", "application/json"),
                ("accept", "*/*"),
                ("user-agent", "curl/7.88.1 promptpath/0.1"),
                ("authorization", "Bearer sk-1"),
            ],
        ),
        (
            "browser",
            "openai",
            [  # br and zstd are not offered: no decoder for them is installed
                ("content-type", "application/json"),
                ("accept", "text/event-stream"),
                ("accept-encoding", "gzip, deflate"),
                ("user-agent", CHROME_UA),
                ("authorization", "Bearer sk-1"),
            ],
        ),
        (
            "identity",
            "ollama",
            [
                ("content-type", "application/json"),
                ("accept", "application/x-ndjson"),
                ("accept-encoding", "identity"),
                ("user-agent", "promptpath/0.1"),
                ("authorization", "Bearer sk-1"),
            ],
        ),
    ],
)
def test_each_shape_sends_exactly_its_clients_headers(
    client: ClientName, provider: str, expected: list[tuple[str, str]]
) -> None:
    assert list(prepare(_opts(client, provider, api_key="sk-1")).headers) == expected


def test_every_shape_in_the_cli_choice_has_a_table_entry_and_vice_versa() -> None:
    from typing import get_args

    assert set(get_args(ClientName)) == set(SHAPES)
    assert all(name == shape.name for name, shape in SHAPES.items())


def test_browser_leaves_out_the_encodings_it_cannot_decode_and_says_so() -> None:
    assert SHAPES["browser"].not_offered == ("br", "zstd")
    shown = _shown(_opts("browser"))
    assert shown["accept_encoding"] == "gzip, deflate" and shown["not_offered"] == ["br", "zstd"]


@pytest.mark.parametrize(
    "header",
    ["Accept-Encoding: br", "User-Agent: my-app/2", "Accept: text/plain"],
)
def test_an_explicit_header_wins_over_the_shape(header: str) -> None:
    name, _, value = header.partition(": ")
    req = prepare(_opts("openai-python", headers=((name, value),)))
    sent = [v for n, v in req.headers if n.lower() == name.lower()]
    assert sent == [value]


def test_json_shows_what_was_sent_after_h() -> None:
    shown = _shown(_opts("curl", headers=(("Accept-Encoding", "gzip"),)))
    assert shown == {
        "as": "curl",
        "default_for_provider": False,
        "user_agent": "curl/7.88.1 promptpath/0.1",
        "accept": "*/*",
        "accept_encoding": "gzip",
        "not_offered": [],
        "http_preference": "auto",
    }
    assert _shown(_opts("curl"))["accept_encoding"] is None


@pytest.mark.parametrize(
    ("value", "offered"),
    [
        (None, ()),
        ("identity", ()),
        ("gzip, deflate", ("gzip", "deflate")),
        ("GZIP;q=0.5, deflate;q=0, br; q=0.000", ("gzip",)),
        ("*", ("*",)),
    ],
)
def test_offered_encodings_read_the_header_as_rfc_9110_does(
    value: str | None, offered: tuple[str, ...]
) -> None:
    headers = () if value is None else (("Accept-Encoding", value),)
    assert offered_encodings(_opts("curl", headers=headers)) == offered


@pytest.mark.parametrize(
    ("path", "client", "http"),
    [
        ("/v1/chat/completions", "openai-python", "1.1"),
        ("/v1/responses", "openai-python", "1.1"),
        ("/v1/messages", "anthropic-python", "1.1"),
        ("/api/chat", "ollama-python", "1.1"),
        ("/v1beta/models/m:streamGenerateContent?alt=sse", "google-genai", "1.1"),
        (
            "/v1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent",
            "google-genai",
            "1.1",
        ),
        ("/openai/deployments/d/chat/completions?api-version=1", "openai-python", "1.1"),
        ("/v2/chat", "cohere", "1.1"),
    ],
)
def test_the_default_client_is_the_providers_sdk_with_its_http_version(
    path: str, client: str, http: str
) -> None:
    opts = build_options(RunArgs(target="https://h" + path), environ={})
    assert (opts.client, opts.http) == (client, http)


def test_as_sets_the_http_version_unless_http_is_given() -> None:
    url = "https://h/v1/chat/completions"
    assert build_options(RunArgs(target=url, client="curl"), environ={}).http == "auto"
    given = build_options(RunArgs(target=url, client="openai-python", http="2"), environ={})
    assert given.http == "2"


def test_an_unknown_client_is_a_usage_error_listing_the_shapes() -> None:
    with pytest.raises(UsageError, match=r"--as must be one of openai-python, .*identity"):
        build_options(RunArgs(target="https://h/v1/chat/completions", client="requests"))


def test_profile_key_as_applies_and_the_command_line_wins(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[profiles.p]\nurl = "https://h/v1/messages"\nas = "browser"\n')
    env = {"PROMPTPATH_CONFIG": str(config)}
    assert build_options(RunArgs(target="p"), environ=env).client == "browser"
    assert build_options(RunArgs(target="p", client="curl"), environ=env).client == "curl"
    config.write_text('[profiles.p]\nurl = "https://h/v1/messages"\nas = 1\n')
    with pytest.raises(UsageError, match="'as' has the wrong type"):
        build_options(RunArgs(target="p"), environ=env)

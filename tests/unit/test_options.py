from __future__ import annotations

import socket

import pytest

from promptpath.commands import RunArgs, build_options
from promptpath.core.errors import UsageError
from promptpath.options import detect_provider, parse_header, parse_resolve, parse_target


def test_target_defaults_port_by_scheme() -> None:
    assert parse_target("https://api.example.com/v1/messages").port == 443
    assert parse_target("http://127.0.0.1/api/chat").port == 80
    t = parse_target("https://[::1]:8443/v1/chat/completions?x=1")
    assert (t.host, t.port, t.path) == ("::1", 8443, "/v1/chat/completions?x=1")


@pytest.mark.parametrize("url", ["ftp://x/y", "https:///nohost", "not a url", "https://h:99999/"])
def test_bad_targets_are_usage_errors(url: str) -> None:
    with pytest.raises(UsageError):
        parse_target(url)


@pytest.mark.parametrize(
    ("path", "provider"),
    [
        ("/v1/chat/completions", "openai"),
        ("/openai/deployments/x/chat/completions?api-version=1", "openai"),
        ("/v1/responses", "responses"),
        ("/v1/messages", "anthropic"),
        ("/api/chat", "ollama"),
        ("/v1/embeddings", None),
    ],
)
def test_provider_detected_from_path(path: str, provider: str | None) -> None:
    assert detect_provider(path) == provider


def test_resolve_spec_accepts_ipv4_and_bracketed_ipv6() -> None:
    assert parse_resolve("api.example.com:443:127.0.0.1") == ("api.example.com", 443, "127.0.0.1")
    assert parse_resolve("h:8443:[::1]") == ("h", 8443, "::1")
    for bad in ("h:443", "h:x:1.2.3.4", "h:443:not-an-ip"):
        with pytest.raises(UsageError):
            parse_resolve(bad)


def test_header_spec() -> None:
    assert parse_header("X-Test:  a b ") == ("X-Test", "a b")
    with pytest.raises(UsageError):
        parse_header("no-colon")


def test_api_key_comes_from_the_named_env_var_and_is_not_in_repr() -> None:
    args = RunArgs(target="https://h/v1/messages", api_key_env="MY_KEY")
    opts = build_options(args, environ={"MY_KEY": "sk-secret-123"})
    assert opts.api_key == "sk-secret-123"
    assert "sk-secret-123" not in repr(opts)
    default = build_options(
        RunArgs(target="https://h/v1/messages"), environ={"ANTHROPIC_API_KEY": "k"}
    )
    assert default.api_key == "k" and default.api_key_env == "ANTHROPIC_API_KEY"


def test_option_validation() -> None:
    with pytest.raises(UsageError, match="provider"):
        build_options(RunArgs(target="https://h/v1/other"), environ={})
    with pytest.raises(UsageError, match="--http"):
        build_options(RunArgs(target="https://h/v1/messages", http="4"), environ={})
    with pytest.raises(UsageError, match="exclude"):
        build_options(RunArgs(target="https://h/v1/messages", both_families=True), environ={})
    opts = build_options(
        RunArgs(target="https://h/api/x", provider="ollama", family=socket.AF_INET6), environ={}
    )
    assert opts.provider == "ollama" and opts.family == socket.AF_INET6


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("https://[::1/v1/chat/completions", "not a valid URL"),
        ("https://user:pw@h/v1/messages", "credentials"),
    ],
)
def test_malformed_or_credentialed_urls_are_usage_errors(url: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        parse_target(url)


@pytest.mark.parametrize(
    "spec", ["Bad Name: v", "X-A: a\r\nEvil: b", "X-U: é", "X-N: a\x00b", "(x): y"]
)
def test_headers_that_cannot_go_on_the_wire_are_refused_before_sending(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_header(spec)


def test_display_url_hides_credential_query_values() -> None:
    from promptpath.options import display_url

    shown = display_url("https://h/v1/x?key=SECRET&api_token=T2&model=m")
    assert "SECRET" not in shown and "T2" not in shown and "model=m" in shown
    assert display_url("https://h/v1/x") == "https://h/v1/x"


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 0.0, -1.0])
def test_timeout_must_be_a_finite_positive_number(timeout: float) -> None:
    with pytest.raises(UsageError, match="--timeout"):
        build_options(RunArgs(target="https://h/v1/messages", timeout=timeout), environ={})


def test_cacert_that_is_not_pem_is_a_usage_error(tmp_path: object) -> None:
    with pytest.raises(UsageError, match="not a PEM"):
        build_options(RunArgs(target="https://h/v1/messages", cacert="/etc/hostname"), environ={})

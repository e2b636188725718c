"""Which proxy a run takes, as curl and httpx decide it (pure)."""

from __future__ import annotations

import base64

import pytest

from promptpath.core.errors import UsageError
from promptpath.proxies import no_proxy_matches, parse_proxy_url, select_proxy


def test_a_bare_host_port_is_an_http_proxy_and_credentials_stay_out_of_the_url() -> None:
    proxy = parse_proxy_url("user:p%40ss@proxy.corp:3128", source="--proxy")
    assert (proxy.scheme, proxy.host, proxy.port) == ("http", "proxy.corp", 3128)
    assert proxy.url == "http://proxy.corp:3128"
    assert (proxy.username, proxy.password) == ("user", "p@ss")
    assert proxy.authorization == "Basic " + base64.b64encode(b"user:p@ss").decode()
    assert "p@ss" not in repr(proxy)


def test_default_ports_follow_curl() -> None:
    assert parse_proxy_url("http://proxy", source="x").port == 1080
    assert parse_proxy_url("https://proxy", source="x").port == 443


def test_proxy_user_overrides_url_credentials() -> None:
    proxy = parse_proxy_url("http://a:b@proxy:8080", source="x", user="c:d")
    assert (proxy.username, proxy.password) == ("c", "d")


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("socks5://127.0.0.1:1080", "socks5:// proxies are not supported"),
        ("ftp://proxy:21", "'ftp' is not supported"),
        ("http://:3128", "no host"),
        ("http://proxy:99999", "not a valid proxy URL"),
        ("http://proxy:3128/path", "without a path"),
    ],
)
def test_bad_proxy_urls_are_usage_errors(url: str, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_proxy_url(url, source="--proxy")
    assert words in caught.value.message and caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("host", "entries", "bypassed"),
    [
        ("api.openai.com", "*", True),
        ("api.openai.com", "openai.com", True),
        ("api.openai.com", ".openai.com", True),
        ("notopenai.com", "openai.com", False),
        ("localhost", "localhost,127.0.0.1", True),
        ("127.0.0.1", "127.0.0.0/8", True),
        ("10.1.2.3", "127.0.0.0/8, 10.0.0.0/8", True),
        ("::1", "::1", True),
        ("[::1]", "::1", True),
        ("example.com", "", False),
        ("127.0.0.1", "localhost", False),
    ],
)
def test_no_proxy_rules(host: str, entries: str, bypassed: bool) -> None:
    assert no_proxy_matches(host, entries) is bypassed


def test_the_variable_follows_the_targets_scheme_lower_case_first() -> None:
    env = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2", "HTTP_PROXY": "x:3"}
    chosen, note = select_proxy("https", "h", flag=None, noproxy=None, user=None, environ=env)
    assert chosen is not None and (chosen.host, chosen.source) == ("lower", "https_proxy")
    assert note is None
    chosen, _ = select_proxy("http", "h", flag=None, noproxy=None, user=None, environ=env)
    assert chosen is not None and chosen.source == "HTTP_PROXY"


def test_all_proxy_is_the_fallback_and_the_flag_wins() -> None:
    env = {"ALL_PROXY": "http://all:9"}
    chosen, _ = select_proxy("https", "h", flag=None, noproxy=None, user=None, environ=env)
    assert chosen is not None and chosen.source == "ALL_PROXY"
    chosen, _ = select_proxy("https", "h", flag="http://f:1", noproxy=None, user=None, environ=env)
    assert chosen is not None and (chosen.host, chosen.source) == ("f", "--proxy")


def test_no_proxy_bypasses_and_says_why() -> None:
    env = {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "localhost"}
    chosen, note = select_proxy(
        "https", "localhost", flag=None, noproxy=None, user=None, environ=env
    )
    assert chosen is None
    assert note == "HTTPS_PROXY bypassed: localhost matches NO_PROXY"
    chosen, note = select_proxy("https", "h", flag=None, noproxy="h", user=None, environ=env)
    assert chosen is None and note is not None and "--noproxy" in note


def test_an_empty_flag_turns_the_environments_proxy_off() -> None:
    env = {"HTTPS_PROXY": "http://p:1"}
    chosen, note = select_proxy("https", "h", flag="", noproxy=None, user=None, environ=env)
    assert chosen is None and note is not None and "turns the proxy off" in note


def test_no_proxy_configured_means_no_note() -> None:
    assert select_proxy("https", "h", flag=None, noproxy=None, user=None, environ={}) == (
        None,
        None,
    )


@pytest.mark.parametrize(
    ("url", "host"),
    [("http://bücher.invalid:3128", "xn--bcher-kva.invalid"), ("http://[::1]:3128", "::1")],
)
def test_a_proxy_host_goes_on_the_wire_in_ascii(url: str, host: str) -> None:
    assert parse_proxy_url(url, source="--proxy").host == host


def test_a_proxy_label_over_63_characters_is_a_usage_error_without_the_password() -> None:
    # getaddrinfo's idna codec raised UnicodeError on the proxy's name: exit 70 before.
    with pytest.raises(UsageError, match="--proxy: the proxy host name has a label") as caught:
        parse_proxy_url(f"http://user:pr0xypw@{'a' * 64}.invalid:3128", source="--proxy")
    assert "pr0xypw" not in caught.value.message

"""Which runs may carry an API key over plain http://: the decision, address by address."""

from __future__ import annotations

import dataclasses

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core import cleartext
from promptpath.core.addr import is_loopback
from promptpath.core.errors import UsageError
from promptpath.options import RunOptions
from promptpath.tracer.cleartext import check_cleartext
from promptpath.tracer.request import key_sent

pytestmark = pytest.mark.unit

KEY = {"OPENAI_API_KEY": "sk-test-0123456789"}


def cleartext_note(opts: RunOptions, address: str) -> str | None:
    """The report's note for a run of ``opts`` that went to ``address`` (as the terminal
    words it from the recorded request)."""
    return cleartext.cleartext_note(
        scheme=opts.target.scheme,
        key_sent=key_sent(opts),
        address=address,
        target_host=opts.target.host,
        proxy_scheme=None if opts.proxy is None else opts.proxy.scheme,
    )


def options(url: str, env: dict[str, str] | None = None, **args: object) -> RunOptions:
    return build_options(RunArgs(target=url, **args), {} if env is None else env)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("host", "loop"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("api.localhost.", True),
        ("10.0.0.7", False),
        ("192.0.2.1", False),
        ("::ffff:10.0.0.1", False),
        ("llm.internal", False),
    ],
)
def test_loopback(host: str, loop: bool) -> None:
    assert is_loopback(host) is loop


def test_a_key_to_a_remote_http_address_is_refused() -> None:
    opts = options("http://llm.internal:8080/v1/chat/completions", KEY)
    with pytest.raises(UsageError) as info:
        check_cleartext(opts, ["127.0.0.1", "10.0.0.7"])
    assert info.value.kind == "cleartext_key" and info.value.exit_code == 2
    assert "10.0.0.7" in info.value.message and "127.0.0.1" not in info.value.message
    assert "--allow-cleartext" in info.value.message


@pytest.mark.parametrize(
    ("url", "env", "addresses"),
    [
        ("http://llm.internal:8080/v1/chat/completions", KEY, ["127.0.0.1", "::1"]),  # loopback
        ("http://llm.internal:8080/v1/chat/completions", {}, ["10.0.0.7"]),  # no key
        ("https://llm.internal:8443/v1/chat/completions", KEY, ["10.0.0.7"]),  # TLS
    ],
)
def test_nothing_to_refuse(url: str, env: dict[str, str], addresses: list[str]) -> None:
    check_cleartext(options(url, env), addresses)


def test_a_key_given_with_h_counts_too() -> None:
    opts = options("http://10.0.0.7/v1/messages", {}, headers=["x-api-key: sk-ant-0123456789"])
    with pytest.raises(UsageError):
        check_cleartext(opts, ["10.0.0.7"])


def test_allow_cleartext_sends_it_with_a_note() -> None:
    opts = options("http://10.0.0.7/v1/chat/completions", KEY, allow_cleartext=True)
    check_cleartext(opts, ["10.0.0.7"])
    assert cleartext_note(opts, "10.0.0.7") == (
        "the API key went over plain http:// to 10.0.0.7 in clear (--allow-cleartext)"
    )


def test_loopback_gets_a_note_and_tls_none() -> None:
    opts = options("http://127.0.0.1:8080/v1/chat/completions", KEY)
    assert "to loopback 127.0.0.1" in (cleartext_note(opts, "127.0.0.1") or "")
    assert cleartext_note(dataclasses.replace(opts, api_key=None), "127.0.0.1") is None


def test_through_a_proxy_the_origin_name_counts() -> None:
    # The proxy on loopback forwards the request to the origin in clear.
    opts = options("http://llm.internal/v1/chat/completions", KEY, proxy="http://127.0.0.1:3128")
    with pytest.raises(UsageError, match=r"llm\.internal \(through the proxy\)"):
        check_cleartext(opts, ["127.0.0.1"])
    local = options("http://localhost:8080/v1/chat/completions", KEY, proxy="127.0.0.1:3128")
    check_cleartext(local, ["127.0.0.1"])
    with pytest.raises(UsageError, match=r"10\.1\.1\.1"):
        check_cleartext(local, ["10.1.1.1"])  # the proxy itself is remote

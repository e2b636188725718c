"""resolve(): option values + environment -> the Plan, and the conflicts refused there."""

from __future__ import annotations

import socket

import pytest

from promptpath.core.errors import UsageError
from promptpath.options import RunOptions, parse_target
from promptpath.plan.plan import Plan
from promptpath.plan.resolve import resolve, values_for
from promptpath.probes.settings import (
    DNSCacheSettings,
    PathSettings,
    ProbeSettings,
    TLSSettings,
)

URL = "https://127.0.0.1:8443/v1/chat/completions"


def plan(url: str = URL, **given: object) -> Plan:
    return resolve(values_for(url, **given), environ={})


@pytest.mark.parametrize(
    ("given", "mode"),
    [
        ({}, "single"),
        ({"warm": True}, "single"),
        ({"compare_http": True}, "compare-http"),
        ({"count": 3}, "series"),
        ({"count": 4, "concurrency": "2"}, "load"),
        ({"count": 8, "concurrency": "1,4"}, "load"),
    ],
)
def test_the_plan_names_its_mode(given: dict[str, object], mode: str) -> None:
    assert plan(**given).mode == mode


def test_the_plan_is_frozen_and_split_by_reader() -> None:
    p = plan(tls_warn_days=40, dns_recheck=5.0, authoritative="127.0.0.1:5353", json_out=True)
    assert p.trace.target.port == 8443 and p.trace.http == "1.1"  # the SDK's shape
    assert p.probe_settings.tls == TLSSettings(warn_days=40, fail_days=7)
    assert p.probe_settings.dns_cache == DNSCacheSettings(
        recheck_s=5.0, authoritative="127.0.0.1:5353"
    )
    assert p.outputs.json_out and p.outputs.fail_on == "fail" and not p.outputs.exports.wanted
    with pytest.raises(AttributeError):
        p.compare_runs = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("url", "given", "words"),
    [
        ("http://127.0.0.1:80/v1/chat/completions", {"http": "3"}, "HTTP/3 needs an https://"),
        (URL, {"http": "3", "proxy": "http://127.0.0.1:3128"}, "QUIC does not cross"),
        (URL, {"compare_http": True, "proxy": "http://127.0.0.1:3128"}, "QUIC does not cross"),
        (URL, {"compare_http": True, "slo": ["ttft_p95<800ms"]}, "not --compare-http"),
        (URL, {"compare_http": True, "warm": True}, "drop --warm"),
        (URL, {"compare_runs": 3}, "--compare-runs goes with --compare-http"),
        (URL, {"count": 3, "probe": ["tls"]}, "drop --probe"),
        (URL, {"count": 4, "connections": 2}, "--connections needs --concurrency"),
        (URL, {"key": "/k.pem"}, "--key needs --cert"),
        (URL, {"ipv4": True, "ipv6": True}, "-4 and -6 exclude each other"),
        (URL, {"fail_on": "never"}, "--fail-on must be warn or fail"),
        (URL, {"idle_max": 0.0}, "--idle-max must be positive"),
        (URL, {"dns_recheck": 1.0}, "--dns-recheck must be at least 2 s"),
        (URL, {"canary_controls": "query"}, "--canary-controls must be one of both"),
        # Before: a probe error after the run (httpx's InvalidURL), or a message about
        # "notaurl/stats/requests/…"; the userinfo is not quoted back.
        (URL, {"canary_admin": "http://u:Pw9@[::1"}, "--canary-admin wants http(s)://HOST"),
        (URL, {"canary_admin": "http://u:Pw9@h:abc/"}, "--canary-admin wants http(s)://HOST"),
        (URL, {"canary_admin": "notaurl"}, "--canary-admin wants http(s)://HOST"),
        (URL, {"canary_admin": "http://h:1/?k=Pw9"}, "--canary-admin takes no query"),
        (URL, {"path_names": True}, "--path-names names the hops the path probe finds"),
        (URL, {"path_names": True, "probe": ["tls,mtu"]}, "add --probe path (or all)"),
    ],
)
def test_conflicts_and_bad_values_are_one_usage_error_before_anything_is_sent(
    url: str, given: dict[str, object], words: str
) -> None:
    with pytest.raises(UsageError) as caught:
        plan(url, **given)
    assert words in caught.value.message
    assert "Pw9" not in caught.value.message


def test_path_names_goes_to_the_path_probes_settings_and_is_off_by_default() -> None:
    assert plan(probe=["path"]).probe_settings.path == PathSettings(names=False)
    assert plan(probe=["all"], path_names=True).probe_settings.path == PathSettings(names=True)


def test_a_spend_line_is_said_before_a_series_is_refused() -> None:
    said: list[str] = []
    with pytest.raises(UsageError, match="add --yes"):
        resolve(
            values_for("https://api.example.invalid/v1/chat/completions", count=21),
            environ={},
            say=said.append,
        )
    assert said == [
        "promptpath: series: 21 requests × ≤64 tokens = ≤1,344 tokens to api.example.invalid"
    ]


def test_the_prefill_probes_input_tokens_are_said_and_above_the_threshold_need_yes() -> None:
    url = "https://api.example.invalid/v1/chat/completions"
    said: list[str] = []
    big = {"probe": ["prefill"], "prefill_sizes": "1000,8000", "prefill_repeats": 3}
    with pytest.raises(UsageError, match="add --yes"):
        resolve(values_for(url, **big), environ={}, say=said.append)
    # The probes' costs together (probes/prefill: 43,000 input tokens and 8 × 16 output).
    assert said == [
        "promptpath: probes (prefill): ≤8 requests, ≤43,128 tokens to api.example.invalid"
    ]
    assert resolve(values_for(url, **big, yes=True), environ={}).probe_settings.prefill.repeats == 3
    # The defaults stay under the threshold; loopback is never refused.
    resolve(values_for(url, probe=["prefill"]), environ={})
    resolve(values_for(URL, probe=["prefill"], prefill_sizes="1000,50000"), environ={})


@pytest.mark.parametrize(
    ("sizes", "repeats", "words"),
    [
        ("256", 3, "at least two different sizes"),
        ("256,256", 3, "at least two different sizes"),
        ("256,abc", 3, "comma-separated token counts"),
        ("8,1024", 3, "between 16 and 200,000"),
        ("256,1024", 0, "--prefill-repeats must be between 1 and 50"),
    ],
)
def test_bad_prefill_settings_are_refused_naming_the_option(
    sizes: str, repeats: int, words: str
) -> None:
    with pytest.raises(UsageError) as caught:
        plan(probe=["prefill"], prefill_sizes=sizes, prefill_repeats=repeats)
    assert words in caught.value.message


def test_the_family_flags_become_the_socket_family() -> None:
    assert plan(ipv4=True).trace.family == socket.AF_INET
    assert plan(ipv6=True).trace.family == socket.AF_INET6
    assert plan().trace.family == 0


def test_an_unknown_option_value_is_a_programming_error_not_a_usage_error() -> None:
    with pytest.raises(TypeError, match="bogus"):
        values_for(URL, bogus=1)


def test_a_probe_derives_its_request_without_replacing_the_spec() -> None:
    spec = RunOptions(
        target=parse_target(URL), provider="openai", model="m", api_key="sk-x", warm=True
    )
    derived = spec.derive(prompt="count", max_tokens=8, timeout=2.0, http="1.1", keyless=True)
    assert (derived.prompt, derived.max_tokens, derived.timeout, derived.http) == (
        "count",
        8,
        2.0,
        "1.1",
    )
    assert derived.api_key is None and derived.warm is False  # never a --warm pair
    assert (derived.target, derived.model) == (spec.target, spec.model)
    assert spec.derive().api_key == "sk-x" and spec.derive().prompt == spec.prompt


def test_defaults_give_the_probes_their_own_defaults() -> None:
    assert plan().probe_settings == ProbeSettings()

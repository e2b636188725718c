"""Secrets leave the report by structure: credential headers by name, the key inside strings."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptpath.core.errors import HTTPStatusError, http_status_kind
from promptpath.core.findings import Finding, Verdict
from promptpath.core.headers import is_credential, is_secret_header, redact_headers
from promptpath.core.timeline import (
    CertInfo,
    CloseKind,
    CloseRecord,
    ErrorInfo,
    ProxyInfo,
    Stage,
    StreamEvent,
    Timeline,
    TLSInfo,
)
from promptpath.options import RunOptions, parse_target
from promptpath.report.json import dumps, result_json
from promptpath.report.redact import MARKER, Redactor, vocabulary
from promptpath.tracer.orchestrator import TraceResult

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
#: Built once: jsonschema.validate would check the schema itself on every example.
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
MS = 1_000_000
NOT_AFTER = "2026-12-31T23:59:59+00:00"


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "proxy-authorization",
        "X-API-Key",
        "api-key",
        "Cookie",
        "Set-Cookie",
        "X-Goog-Api-Key",
        "x-auth-token",
        "x-amz-security-token",
        "X-Client-Secret",
        "x_api_key",
    ],
)
def test_credential_headers_are_secret(name: str) -> None:
    assert is_secret_header(name)


@pytest.mark.parametrize(
    "name",
    [
        "X-Session-Sticky",
        "x-promptpath-tokens",
        "x-promptpath-pause-s",
        "Accept",
        "keep-alive",
        "x-keyboard",
        "x-token-count",
        "content-type",
    ],
)
def test_headers_that_only_mention_a_word_are_not_secret(name: str) -> None:
    assert not is_secret_header(name)


def test_a_long_key_is_found_in_every_spelling_a_message_carries() -> None:
    key = 'sk-"a b"/9'
    redactor = Redactor.of([key])
    echoed = f"raw {key} json {json.dumps(key)} url ?k=sk-%22a%20b%22%2F9"
    assert redactor.text(echoed) == f'raw {MARKER} json "{MARKER}" url ?k={MARKER}'


def test_a_short_key_is_not_searched_for_in_text() -> None:
    # "2026" as a key must not rewrite a certificate date, nor reveal itself by the gaps.
    assert Redactor.of(["2026", "true", "0"]).text(f"expires {NOT_AFTER}, ok true") == (
        f"expires {NOT_AFTER}, ok true"
    )


@pytest.mark.parametrize(
    ("echoed", "shown"),
    [
        ("invalid credentials: Bearer Zq7Kp.", f"invalid credentials: Bearer {MARKER}."),
        ("Authorization: Basic Zq7Kp", f"Authorization: Basic {MARKER}"),
        ("x-api-key: Zq7Kp", f"x-api-key: {MARKER}"),
        ("X-Api-Key-V2=Zq7Kp;", f"X-Api-Key-V2={MARKER};"),
        ("GET /v1/x?api_key=Zq7Kp&m=1", f"GET /v1/x?api_key={MARKER}&m=1"),
        ('{"api_key": "Zq7Kp"}', f'{{"api_key": "{MARKER}"}}'),
        ("password = 'Zq7Kp'", f"password = '{MARKER}'"),
        # Outside such a place a short key is not searched for (see above) ...
        ("Zq7Kp is not a valid key", "Zq7Kp is not a valid key"),
        # ... nor inside a longer token that merely starts with it.
        ("Bearer Zq7Kpxyz", "Bearer Zq7Kpxyz"),
    ],
)
def test_a_short_key_is_redacted_where_the_text_says_a_credential_follows(
    echoed: str, shown: str
) -> None:
    assert Redactor.of(["Zq7Kp"]).text(echoed) == shown


def test_a_short_key_echoed_in_json_or_url_spelling_is_redacted_in_place_too() -> None:
    redactor = Redactor.of(['k"y/1'])
    assert redactor.text('token: k\\"y/1') == f"token: {MARKER}"
    assert redactor.text("?token=k%22y%2F1&a=b") == f"?token={MARKER}&a=b"


def test_url_userinfo_in_any_text_is_redacted_whoever_it_belongs_to() -> None:
    text = "cannot reach http://adm:Pw@127.0.0.1:9/stats (see https://h/x@y)"
    assert Redactor.of([]).text(text) == (
        f"cannot reach http://{MARKER}@127.0.0.1:9/stats (see https://h/x@y)"
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("Authentication", "Bearer Zq7Kp"),
        ("X-Api-Key-V2", "Basic dTpw"),
        ("X-Custom", "bearer  tok"),
        ("X-Api-Key-V2", "Zq7Kp"),
        ("api-key-2", "Zq7Kp"),
    ],
)
def test_a_credential_header_is_known_by_its_value_or_a_versioned_name(
    name: str, value: str
) -> None:
    assert is_credential(name, value)
    assert redact_headers([(name, value)]) == [(name, MARKER)]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-Note", "Bearer"),
        ("Accept", "text/event-stream"),
        ("x-v2", "1"),
        ("WWW-Authenticate", 'Bearer realm="api", error="invalid_token"'),
        ("Proxy-Authenticate", 'Basic realm="squid"'),
    ],
)
def test_a_header_that_only_mentions_a_scheme_is_not_a_credential(name: str, value: str) -> None:
    assert not is_credential(name, value)


def _result(options: RunOptions, echo: str) -> TraceResult:
    """A run that failed with a 401 whose body, event and finding all echo ``echo``."""
    t0 = 10_000 * MS
    tl = Timeline(t0_ns=t0, t0_unix_ns=0)
    tl.stages.append(Stage(name="connect", start_ns=t0, end_ns=t0 + 5 * MS))
    tl.milestones["connected"] = t0 + 5 * MS
    tl.address = ("127.0.0.1", 443)
    tl.family = "ipv4"
    tl.http_version = "HTTP/1.1"
    tl.status = 401
    tl.tls = TLSInfo(
        sni="h",
        alpn_offered=("h2",),
        version="TLSv1.3",
        verified=True,
        cert=CertInfo(
            subject="CN=h",
            issuer="CN=ca 2026",
            sans=("h",),
            not_before="2026-01-01T00:00:00+00:00",
            not_after=NOT_AFTER,
            days_left=31,
        ),
    )
    tl.response_headers = [*options.headers, ("content-type", "application/json")]
    tl.proxy = ProxyInfo(url="http://127.0.0.1:3128", source="--proxy", headers=[*options.headers])
    tl.events.append(
        StreamEvent(t_ns=t0 + 6 * MS, kind="error", error=json.dumps({"message": echo}))
    )
    exc = HTTPStatusError(
        f"401 from the server: Incorrect API key provided: {echo}",
        stage="response",
        kind=http_status_kind(401),
        status=401,
    )
    tl.error = ErrorInfo.from_error(exc)
    finding = Finding(
        probe="buffering", verdict=Verdict.WARN, summary=f"saw {echo}", evidence={"body": echo}
    )
    return TraceResult(options=options, timeline=tl, findings=[finding])


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


TOKEN = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_names = st.one_of(
    st.sampled_from(
        ["Authorization", "x-api-key", "X-Session-Sticky", "x-promptpath-tokens", "content-type"]
    ),
    st.text(TOKEN, min_size=1, max_size=20),
)
_values = st.one_of(
    st.sampled_from(["true", "false", "null", "0", "2026", '"', "[redacted]", "Bearer sk-x"]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(headers=st.lists(st.tuples(_names, _values), max_size=4), key=_values)
def test_json_report_stays_valid_and_keeps_no_secret(
    headers: list[tuple[str, str]], key: str
) -> None:
    options = RunOptions(
        target=parse_target("https://h/v1/chat/completions"),
        provider="openai",
        model="m",
        api_key=key or None,
        headers=tuple(headers),
    )
    text = dumps(result_json(_result(options, key), exit_code=6))
    body = json.loads(text)
    VALIDATOR.validate(body)
    assert body["ok"] is False and body["exit_code"] == 6
    assert body["tls"]["cert"]["not_after"] == NOT_AFTER
    secrets = [key] + [v for n, v in headers if is_secret_header(n)]
    values = list(_strings(body))
    # A "key" inside the marker itself (``redacted``) is the one spelling that must remain.
    for secret in (s for s in secrets if len(s) >= 8 and s not in MARKER):
        # The schema's own enum words are ours, never data (redact.vocabulary).
        assert not any(secret in v for v in values if v not in vocabulary()), secret
    redactor = Redactor.for_options(options)
    for name, value in body["proxy"]["headers"].items():
        sent = dict(headers)[name]
        assert value == (MARKER if is_secret_header(name) else redactor.text(sent))


def test_a_sticky_header_and_a_key_of_true_leave_true_alone() -> None:
    options = RunOptions(
        target=parse_target("https://h/v1/chat/completions"),
        provider="openai",
        model="m",
        api_key="true",
        headers=(("X-Session-Sticky", "true"),),
    )
    body = json.loads(dumps(result_json(_result(options, "true"), exit_code=0)))
    assert body["proxy"]["headers"] == {"X-Session-Sticky": "true"}
    assert body["error"]["message"].endswith("provided: true")


def test_a_key_that_spells_one_of_our_own_words_leaves_them_whole() -> None:
    # Found by the property test: a key "identity" blanked client.as and broke the schema.
    redactor = Redactor.of(["identity", "openai-p"])
    assert redactor.text("identity") == "identity"
    assert redactor.text("openai-python") == "openai-python"
    assert redactor.text("the key identity leaked") == f"the key {MARKER} leaked"


@pytest.mark.parametrize(
    "kind", ["fin", "rst", "tls_close_notify", "quic_close", "stream_reset", "goaway"]
)
def test_every_close_kind_the_socket_layer_records_is_valid_json(kind: CloseKind) -> None:
    target = parse_target("https://h/v1/chat/completions")
    options = RunOptions(target=target, provider="openai", model="m")
    result = _result(options, "nothing secret here")
    result.timeline.close = CloseRecord(kind=kind, t_ns=result.timeline.t0_ns + 1)
    body = json.loads(dumps(result_json(result, exit_code=7)))
    VALIDATOR.validate(body)
    assert body["stream"]["closed_by"] == kind


# -- every spelling, every piece, every channel -------------------------------------------

KEY = "sk-proj-Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2"


@pytest.mark.parametrize(
    ("text", "left"),
    [
        (f"cut at the snippet limit: {KEY[:16]}…", "cut at the snippet limit: [redacted]…"),
        (f"cut at the front: …{KEY[-13:]} end", "cut at the front: …[redacted] end"),
        (f"a middle piece {KEY[5:17]}!", "a middle piece [redacted]!"),
        # 11 characters do not identify a key (sk-proj- is everyone's): the threshold.
        (f"too short {KEY[:11]}", f"too short {KEY[:11]}"),
    ],
)
def test_any_twelve_character_piece_of_a_key_is_redacted_wherever_the_text_was_cut(
    text: str, left: str
) -> None:
    assert Redactor.of([KEY]).text(text) == left


def test_a_basic_credential_is_found_as_its_token_its_pair_and_its_password() -> None:
    import base64

    token = base64.b64encode(b"alice:correct-horse").decode()
    redactor = Redactor.of([f"Basic {token}"])
    assert redactor.text(f"Via: 1.1 Basic {token}") == f"Via: 1.1 {MARKER}"
    assert redactor.text(f"b64 {token}") == f"b64 {MARKER}"
    assert redactor.text("user alice:correct-horse") == f"user {MARKER}"
    assert redactor.text("pw correct-horse.") == f"pw {MARKER}."
    assert redactor.text("alice is a user name, not a secret") == (
        "alice is a user name, not a secret"
    )


def test_a_key_is_found_url_encoded_as_servers_echo_it() -> None:
    key = "sk/ab+cd ef/gh==xyz"
    echoed = "a sk%2fab%2bcd%20ef%2fgh%3d%3dxyz b sk%2Fab%2Bcd+ef%2Fgh%3D%3Dxyz c"
    assert Redactor.of([key]).text(echoed) == f"a {MARKER} b {MARKER} c"


def test_a_key_is_found_base64_encoded() -> None:
    import base64

    encoded = base64.b64encode(KEY.encode()).decode()
    assert Redactor.of([KEY]).text(f"token={encoded}") == f"token={MARKER}"


def test_the_proxy_password_and_pair_are_secrets_of_the_run() -> None:
    from promptpath.proxies import parse_proxy_url

    proxy = parse_proxy_url("http://bob:s3cret-passw0rd@127.0.0.1:3128", source="--proxy")
    options = RunOptions(
        target=parse_target("https://h/v1/chat/completions"),
        provider="openai",
        model="m",
        proxy=proxy,
    )
    redactor = Redactor.for_options(options)
    assert redactor.text("bob:s3cret-passw0rd and s3cret-passw0rd") == f"{MARKER} and {MARKER}"


_echo_keys = st.one_of(
    st.sampled_from([KEY, "Bearer " + KEY, "sk-ant-api03-" + "x" * 20]),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=12, max_size=40),
)
_controls = st.text(st.sampled_from("\x1b\x00\x07\r\n\x9b\u202e\ud800[]/"), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=_echo_keys, cut=st.integers(min_value=0, max_value=40), noise=_controls)
def test_terminal_text_and_every_export_keep_no_piece_of_the_key_and_no_control(
    key: str, cut: int, noise: str
) -> None:
    """A server and a proxy that echo the key everywhere: response headers, the proxy's
    headers and reason, an error message cut ``cut`` characters into the key, an event,
    a finding, with control characters around it. The terminal (-v), the JSON, HAR, JUnit
    and Prometheus keep no 12-character piece of it, and the terminal no control."""
    import base64
    import io
    import re

    from rich.console import Console

    from promptpath.core.redaction import PIECE
    from promptpath.report import har, junit, prometheus, terminal

    assume_key = key.split(" ", 1)[-1]
    options = RunOptions(
        target=parse_target("https://h/v1/chat/completions"),
        provider="openai",
        model="m",
        api_key=assume_key,
        verbose=True,
    )
    result = _result(options, noise + key + noise)
    tl = result.timeline
    tl.response_headers = [
        ("x-request-id", key),
        ("via", f"1.1 {noise}{key}"),
        ("server", noise + base64.b64encode(assume_key.encode()).decode()),
        ("content-type", "application/json"),
    ]
    assert tl.proxy is not None
    tl.proxy.headers = [("via", key), ("proxy-agent", noise + key)]
    tl.proxy.reason = f"refused {key}{noise}"
    tl.proxy.status = 407
    tl.proxy.tunnel = True
    cut_text = f"body: {assume_key[: PIECE + cut]}…{noise}"
    assert tl.error is not None
    tl.error.message = cut_text

    def channels_of(run: TraceResult) -> dict[str, str]:
        out = io.StringIO()
        console = Console(file=out, width=100, color_system=None, force_terminal=False)
        terminal.render(console, run)
        body = result_json(run, exit_code=6)
        return {
            "terminal": out.getvalue(),
            "json": dumps(body),
            "har": json.dumps(har.render(body)),
            "junit": junit.render(body),
            "prometheus": prometheus.render(body),
        }

    channels = channels_of(result)
    # What every channel says on its own, for a run that echoes nothing: a "key" spelt like
    # one of our words ("promptpath_runs", "client_cert_required") is ours as much as theirs.
    own = "".join(channels_of(_result(dataclasses.replace(options, api_key=None), "")).values())
    encoded = base64.b64encode(assume_key.encode()).decode()
    pieces = {s[i : i + PIECE] for s in (assume_key, encoded) for i in range(len(s) - PIECE + 1)}
    for channel, text in channels.items():
        for piece in pieces:
            if piece in MARKER or piece in own or any(piece in word for word in vocabulary()):
                continue
            assert piece not in text, (channel, piece)
    bad = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
    assert bad.search(channels["terminal"]) is None
    json.loads(channels["json"])
    channels["json"].encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(
    secret=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=12),
    start=st.integers(min_value=0, max_value=200),
    length=st.integers(min_value=12, max_value=200),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_no_piece_survives_at_any_offset_the_prefilter_included(
    secret: str, start: int, length: int, before: str, after: str
) -> None:
    from promptpath.core.redaction import PIECE

    piece = secret[start : start + length]
    if len(piece) < PIECE:
        piece = secret[-PIECE:]
    cleaned = Redactor.of([secret], keep=frozenset()).text(before + piece + after)
    assert not any(piece[i : i + PIECE] in cleaned for i in range(len(piece) - PIECE + 1))


def _template_only(body: Any) -> Any:
    """The same report with every string emptied: what the page says on its own."""
    if isinstance(body, dict):
        return {k: _template_only(v) for k, v in body.items()}
    if isinstance(body, list):
        return [_template_only(v) for v in body]
    return "" if isinstance(body, str) else body


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(headers=st.lists(st.tuples(_names, _values), max_size=4), key=_values)
def test_html_and_svg_reports_keep_no_secret(headers: list[tuple[str, str]], key: str) -> None:
    from html import escape

    from promptpath.report.html import render_html
    from promptpath.report.svg import render_svg

    options = RunOptions(
        target=parse_target("https://h/v1/chat/completions"),
        provider="openai",
        model="m",
        api_key=key or None,
        headers=tuple(headers),
    )
    body = json.loads(dumps(result_json(_result(options, key), exit_code=6)))
    skeleton = _template_only(body)
    own = render_html(skeleton) + render_svg(skeleton)
    outputs = render_html(body) + render_svg(body)
    secrets = [key] + [v for n, v in headers if is_secret_header(n)]
    for secret in (s for s in secrets if len(s) >= 8 and s not in MARKER):
        # Each spelling a page could carry it in: raw, HTML-escaped, inside the JSON block.
        for form in {secret, escape(secret), json.dumps(secret, ensure_ascii=True)[1:-1]}:
            if form in own or any(form in word for word in vocabulary()):
                continue  # our own words, never data
            assert form not in outputs, secret


def test_a_sigv4_signature_is_redacted_though_no_run_knew_it_in_advance() -> None:
    sig = "5022d605ec27e2efb34108877f0c210ab1350d3503267ebad46e3594478d443a"
    auth = (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261202/us-east-1/bedrock/aws4_request,"
        f" SignedHeaders=content-type;host;x-amz-date, Signature={sig}"
    )
    for redactor in (Redactor.of([]), Redactor.of(["some-other-secret-value"])):
        shown = redactor.text(f"echo: {auth} and ?X-Amz-Signature={sig[:20]}")
        assert sig[:12] not in shown and sig[-12:] not in shown
        assert "Credential=AKIDEXAMPLE/20261202/us-east-1/bedrock" in shown  # not a secret
        assert shown.count("Signature=[redacted]") == 2
    assert Redactor.of([]).text("no signature= here") == "no signature= here"

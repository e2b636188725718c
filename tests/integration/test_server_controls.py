"""Each behaviour control does what it says, seen from a real client on loopback.

Timing bounds are generous: CI machines are small and noisy. The server runs in its own
process, so its work does not steal the GIL from the measuring client.
"""

from __future__ import annotations

import itertools
import re
import ssl
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from promptpath.server.tokens import answer_tokens
from tests.helpers.refserver import Message, RefServer, collect, sdk_http_client
from tests.integration.conftest import StartRefServer

PROMPT = "Why does my BGP session keep flapping?"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": PROMPT}], "stream": True}
MESSAGES = {**CHAT, "model": "claude-3-5-haiku-latest", "max_tokens": 64}
RESPONSES = {"model": "gpt-4o-mini", "input": PROMPT, "stream": True}
OLLAMA = {"model": "llama3.2", "messages": [{"role": "user", "content": PROMPT}]}


def ctl(**controls: object) -> dict[str, str]:
    """``ctl(ttft_ms=300)`` -> ``{"x-promptpath-ttft-ms": "300"}``."""
    return {f"x-promptpath-{k.replace('_', '-')}": str(v) for k, v in controls.items()}


def tls_client(server: RefServer, *, http2: bool = False) -> httpx.Client:
    assert server.ca is not None
    context = ssl.create_default_context(cafile=server.ca)
    return httpx.Client(verify=context, http2=http2, http1=not http2, timeout=10.0)


@pytest.fixture
def h1(refserver_tls: RefServer) -> Iterator[httpx.Client]:
    """An HTTP/1.1 client whose connection is already up: timings exclude the handshake."""
    with tls_client(refserver_tls) as client:
        client.get(refserver_tls.path("/healthz"))
        yield client


@pytest.fixture
def url(refserver_tls: RefServer) -> str:
    return refserver_tls.url


def chat_content(message: Message) -> str:
    if not message.is_json or message.data == "[DONE]":
        return ""
    choices = message.json().get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


def content_messages(messages: list[Message]) -> list[Message]:
    return [m for m in messages if chat_content(m)]


# -- timing --------------------------------------------------------------------------------


def test_ttft_follows_injected_first_token_delay(h1: httpx.Client, url: str) -> None:
    got = collect(h1, url + "/v1/chat/completions", CHAT, ctl(ttft_ms=300, rate=0, tokens=3))
    first_event_ms = (got.stream.data_messages[0].t - got.t_request) * 1000
    first_token_ms = (content_messages(got.stream.data_messages)[0].t - got.t_request) * 1000
    assert first_event_ms < 150, "the role chunk goes out at once, before the delay"
    assert 280 <= first_token_ms <= 600


def test_tokens_follow_the_cadence(h1: httpx.Client, url: str) -> None:
    got = collect(h1, url + "/v1/chat/completions", CHAT, ctl(rate=20, tokens=8))
    times = [m.t for m in content_messages(got.stream.data_messages)]
    assert len(times) == 8
    mean_gap_ms = (times[-1] - times[0]) / 7 * 1000
    assert 40 <= mean_gap_ms <= 80
    # absolute deadlines: no gap collapses to zero because an earlier one was late
    assert len({round(t, 3) for t in times}) == 8


def test_pause_after_k_tokens(h1: httpx.Client, url: str) -> None:
    got = collect(
        h1, url + "/v1/chat/completions", CHAT, ctl(rate=0, tokens=5, pause_after=2, pause_s=0.4)
    )
    times = [m.t for m in content_messages(got.stream.data_messages)]
    gaps_ms = [(b - a) * 1000 for a, b in itertools.pairwise(times)]
    assert 380 <= gaps_ms[1] <= 800
    assert max(gaps_ms[0], gaps_ms[2], gaps_ms[3]) < 150


def test_keepalive_comments_fill_long_waits(h1: httpx.Client, url: str) -> None:
    got = collect(
        h1, url + "/v1/chat/completions", CHAT, ctl(ttft_ms=700, keepalive_s=0.2, rate=0, tokens=2)
    )
    first_token_t = content_messages(got.stream.data_messages)[0].t
    comments = got.stream.comments
    assert len([c for c in comments if c.t < first_token_t]) >= 2
    pattern = re.compile(r"keepalive seq=(\d+) sent_unix_ns=(\d+)")
    seqs = []
    for comment in comments:
        match = pattern.fullmatch(comment.data)
        assert match, comment.data
        seqs.append(int(match.group(1)))
    assert seqs[0] == 1, "the role chunk is seq 0; keepalives share the event sequence"
    assert seqs == sorted(seqs)


def test_ndjson_gets_no_keepalive_lines(h1: httpx.Client, url: str) -> None:
    got = collect(
        h1,
        url + "/api/chat",
        OLLAMA,
        ctl(ttft_ms=450, keepalive_s=0.1, rate=0, tokens=2),
        sse=False,
    )
    assert all(m.is_json for m in got.stream.data_messages)
    assert len(got.stream.data_messages) == 3


# -- failures inside the stream ------------------------------------------------------------


def test_truncate_over_http11_drops_the_chunked_terminator(h1: httpx.Client, url: str) -> None:
    got = collect(h1, url + "/v1/chat/completions", CHAT, ctl(rate=0, tokens=10, truncate_after=3))
    assert isinstance(got.error, httpx.RemoteProtocolError)
    assert len(content_messages(got.stream.data_messages)) == 3
    assert all(m.data != "[DONE]" for m in got.stream.data_messages)


def test_truncate_over_http2_ends_without_terminal_marker(refserver_tls: RefServer) -> None:
    with tls_client(refserver_tls, http2=True) as client:
        got = collect(
            client, refserver_tls.path("/v1/messages"), MESSAGES, ctl(rate=0, truncate_after=2)
        )
    events = [m.event for m in got.stream.data_messages]
    assert events.count("content_block_delta") == 2
    assert "message_stop" not in events


def test_truncate_on_plain_upstream_cuts_the_connection(refserver_plain: RefServer) -> None:
    with httpx.Client(timeout=10.0) as client:
        got = collect(
            client,
            refserver_plain.path("/v1/chat/completions"),
            CHAT,
            ctl(rate=0, truncate_after=0),
        )
    assert isinstance(got.error, httpx.RemoteProtocolError)
    assert [m.json()["choices"][0]["delta"]["role"] for m in got.stream.data_messages] == [
        "assistant"
    ]


def test_error_event_in_openai_stream_raises_in_the_sdk(
    h1: httpx.Client, refserver_tls: RefServer
) -> None:
    url = refserver_tls.url
    got = collect(h1, url + "/v1/chat/completions", CHAT, ctl(rate=0, error_after=4))
    last = got.stream.data_messages[-1].json()
    assert last["error"]["type"] == "server_error"
    assert len(content_messages(got.stream.data_messages)) == 4
    assert got.error is None, "the error event ends the stream cleanly"

    with sdk_http_client(openai, refserver_tls) as http:
        client = openai.OpenAI(
            base_url=url + "/v1",
            api_key="sk-test",
            http_client=http,
            max_retries=0,
            default_headers=ctl(rate=0, error_after=4),
        )
        with pytest.raises(openai.APIError, match="error while processing"):
            list(client.chat.completions.create(model="m", messages=[], stream=True))


def test_error_event_in_anthropic_stream_is_overloaded(refserver_tls: RefServer) -> None:
    with sdk_http_client(anthropic, refserver_tls) as http:
        client = anthropic.Anthropic(
            base_url=refserver_tls.url,
            api_key="k",
            http_client=http,
            max_retries=0,
            default_headers=ctl(rate=0, error_after=3),
        )
        seen: list[str] = []
        with (
            pytest.raises(anthropic.APIStatusError, match="overloaded_error"),
            client.messages.stream(model="m", max_tokens=64, messages=[]) as stream,
        ):
            seen.extend(stream.text_stream)
    assert "".join(seen) == "".join(answer_tokens(3))


def test_error_in_responses_stream_is_error_then_response_failed(
    h1: httpx.Client, url: str
) -> None:
    got = collect(h1, url + "/v1/responses", RESPONSES, ctl(rate=0, error_after=1))
    tail = got.stream.data_messages[-2:]
    assert [m.event for m in tail] == ["error", "response.failed"]
    assert tail[0].json()["code"] == "server_error"
    assert tail[1].json()["response"]["status"] == "failed"


def test_error_in_ollama_stream_is_an_error_line(h1: httpx.Client, url: str) -> None:
    got = collect(h1, url + "/api/chat", OLLAMA, ctl(rate=0, error_after=2), sse=False)
    lines = [m.json() for m in got.stream.data_messages]
    assert len(lines) == 3 and "error" in lines[-1] and not lines[-1].get("done")


def test_malformed_event_is_not_json_and_the_stream_goes_on(h1: httpx.Client, url: str) -> None:
    got = collect(h1, url + "/v1/chat/completions", CHAT, ctl(rate=0, tokens=5, malformed_after=2))
    messages = got.stream.data_messages
    bad = [i for i, m in enumerate(messages) if not m.is_json and m.data != "[DONE]"]
    assert len(bad) == 1
    assert len(content_messages(messages[: bad[0]])) == 2
    assert len(content_messages(messages)) == 5
    assert messages[-1].data == "[DONE]"


@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/messages", MESSAGES), ("/v1/responses", RESPONSES), ("/api/chat", OLLAMA)],
    ids=["anthropic", "responses", "ollama"],
)
def test_malformed_event_in_every_dialect(
    h1: httpx.Client, url: str, path: str, body: dict[str, object]
) -> None:
    sse = path != "/api/chat"
    got = collect(h1, url + path, body, ctl(rate=0, tokens=3, malformed_after=1), sse=sse)
    assert sum(1 for m in got.stream.data_messages if not m.is_json) == 1


# -- whole-response substitutions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "status", "kind"),
    [
        ("/v1/chat/completions", CHAT, 401, "invalid_api_key"),
        ("/v1/chat/completions", CHAT, 429, "rate_limit_exceeded"),
        ("/v1/responses", RESPONSES, 500, "server_error"),
        ("/v1/chat/completions", CHAT, 503, "server_error"),
        ("/v1/messages", MESSAGES, 529, "overloaded_error"),
        ("/v1/messages", MESSAGES, 429, "rate_limit_error"),
        ("/v1/messages", MESSAGES, 401, "authentication_error"),
        ("/api/chat", OLLAMA, 500, "internal server error"),
    ],
)
def test_status_control_answers_with_a_dialect_error_body(
    h1: httpx.Client, url: str, path: str, body: dict[str, object], status: int, kind: str
) -> None:
    response = h1.post(url + path, json=body, headers=ctl(status=status))
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert kind in response.text
    if status == 429:
        assert response.headers["retry-after"] == "2"


def test_status_429_is_a_rate_limit_error_in_the_openai_sdk(refserver_tls: RefServer) -> None:
    with sdk_http_client(openai, refserver_tls) as http:
        client = openai.OpenAI(
            base_url=refserver_tls.path("/v1"),
            api_key="k",
            http_client=http,
            max_retries=0,
            default_headers=ctl(status=429),
        )
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model="m", messages=[], stream=True)
    assert info.value.response.headers["retry-after"] == "2"


@pytest.mark.parametrize(
    ("kind", "content_type"), [("html", "text/html"), ("json", "application/json")]
)
def test_body_control_replaces_the_event_stream(
    h1: httpx.Client, url: str, kind: str, content_type: str
) -> None:
    response = h1.post(url + "/v1/chat/completions", json=CHAT, headers=ctl(body=kind, rate=0))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(content_type)
    if kind == "json":
        assert response.json()["object"] == "chat.completion"
    else:
        assert "<html>" in response.text


def test_batch_coalesces_events_into_one_write(h1: httpx.Client, url: str) -> None:
    got = collect(h1, url + "/v1/chat/completions", CHAT, ctl(batch=4, rate=20, tokens=7))
    messages = got.stream.data_messages
    # role + 7 tokens + finish + [DONE] = 10 events -> writes of 4, 4, 2
    assert len(messages) == 10
    stamps = [m.json()["promptpath"]["sent_unix_ns"] for m in messages[:9]]
    assert len(set(stamps[0:4])) == 1 and len(set(stamps[4:8])) == 1
    assert len({stamps[0], stamps[4], stamps[8]}) == 3
    # and they arrive together: one read completes each group of four
    assert len({m.t for m in messages[0:4]}) == 1
    assert len({m.t for m in messages[4:8]}) == 1
    assert messages[4].t - messages[3].t > 0.1


@pytest.mark.parametrize("value", ["no", "yes"])
def test_accel_buffering_header(h1: httpx.Client, url: str, value: str) -> None:
    got = collect(h1, url + "/v1/chat/completions", CHAT, ctl(accel_buffering=value, rate=0))
    assert got.headers["x-accel-buffering"] == value


def test_no_accel_buffering_header_by_default(h1: httpx.Client, url: str) -> None:
    got = collect(h1, url + "/v1/chat/completions", CHAT, ctl(rate=0, tokens=1))
    assert "x-accel-buffering" not in got.headers


def test_response_header_control_repeats_and_reaches_error_answers(
    h1: httpx.Client, url: str
) -> None:
    # Two occurrences of the control are two headers; a 429 carries them as well, as a
    # provider's rate-limit headers ride on its 429.
    headers = [
        ("x-promptpath-response-header", "x-ratelimit-remaining-requests: 7"),
        ("x-promptpath-response-header", "Server-Timing: db;dur=53, app;dur=47.2"),
        ("x-promptpath-rate", "0"),
    ]
    ok = h1.post(url + "/v1/chat/completions", json=CHAT, headers=headers)
    assert ok.status_code == 200
    assert ok.headers["x-ratelimit-remaining-requests"] == "7"
    assert ok.headers["server-timing"] == "db;dur=53, app;dur=47.2"
    limited = h1.post(
        url + "/v1/chat/completions", json=CHAT, headers=[*headers, ("x-promptpath-status", "429")]
    )
    assert limited.status_code == 429 and limited.headers["x-ratelimit-remaining-requests"] == "7"


def test_serve_flag_adds_a_response_header_to_every_answer(
    start_refserver: StartRefServer,
) -> None:
    server = start_refserver(
        tls=False, extra_args=["--response-header", "cf-ray: 8a1b2c3d4e5f-FRA"]
    )
    with httpx.Client(timeout=10.0) as client:
        got = client.post(server.url + "/v1/chat/completions", json=CHAT, headers=ctl(rate=0))
    assert got.headers["cf-ray"] == "8a1b2c3d4e5f-FRA"


# -- bad controls, authentication ----------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("x-promptpath-rate", "fast"),
        ("x-promptpath-ttft-ms", "-5"),
        ("x-promptpath-status", "700"),
        ("x-promptpath-body", "xml"),
        ("x-promptpath-batch", "0"),
        ("x-promptpath-bogus", "1"),
        ("x-promptpath-response-header", "no colon here"),
        ("x-promptpath-response-header", "content-length: 3"),
    ],
)
def test_bad_control_header_is_a_400_naming_the_header(
    h1: httpx.Client, url: str, header: str, value: str
) -> None:
    response = h1.post(url + "/v1/chat/completions", json=CHAT, headers={header: value})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == header
    assert header in error["message"]


def test_api_key_is_required_when_configured(
    start_refserver: StartRefServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROMPTPATH_TEST_KEY", "sk-right")
    server = start_refserver(extra_args=["--api-key-env", "PROMPTPATH_TEST_KEY", "--rate", "0"])
    with tls_client(server) as client:
        api = server.path("/v1/chat/completions")
        assert client.post(api, json=CHAT).status_code == 401
        wrong = client.post(api, json=CHAT, headers={"authorization": "Bearer sk-wrong"})
        assert wrong.status_code == 401
        assert wrong.json()["error"]["code"] == "invalid_api_key"
        anth = client.post(
            server.path("/v1/messages"), json=MESSAGES, headers={"x-api-key": "nope"}
        )
        assert anth.json()["error"]["type"] == "authentication_error"
        ok = client.post(api, json=CHAT, headers={"authorization": "Bearer sk-right"})
        assert ok.status_code == 200
        ok = client.post(
            server.path("/v1/messages"), json=MESSAGES, headers={"x-api-key": "sk-right"}
        )
        assert ok.status_code == 200
        assert client.get(server.path("/healthz")).status_code == 200


def test_body_controls_shape_the_stream_and_the_first_event_reports_them(
    h1: httpx.Client, url: str
) -> None:
    body = {**CHAT, "promptpath": {"rate": 0, "tokens": 4, "pause-after": 2, "pause-s": "0.4"}}
    got = collect(h1, url + "/v1/chat/completions", body, ctl(tokens=3))
    stamps = [m.json()["promptpath"] for m in got.stream.data_messages if m.is_json]
    first = stamps[0]
    assert first["request_id"] == got.headers["x-request-id"]
    assert first["controls"]["pause-s"] == 0.4
    assert first["controls"]["tokens"] == 3  # the header won over the body
    assert first["controls_from"] == {
        "pause-after": "body",
        "pause-s": "body",
        "rate": "body",
        "tokens": "header",
    }
    assert all("controls" not in s for s in stamps[1:])
    assert len(content_messages(got.stream.data_messages)) == 3
    sent = [s["sent_unix_ns"] for s in stamps]
    assert max(b - a for a, b in itertools.pairwise(sent)) >= 0.35e9  # the body's pause

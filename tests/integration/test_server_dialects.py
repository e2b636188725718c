"""The reference endpoint speaks each dialect well enough for the official SDKs, over
HTTP/1.1, HTTP/2 and HTTP/3, and stamps every event with its send time."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from promptpath.server.tokens import answer_tokens
from tests.helpers.refserver import (
    RefServer,
    StreamCollector,
    collect,
    h3_request,
    sdk_http_client,
)

PROMPT = "Why does my BGP session keep flapping?"
FAST = {"x-promptpath-rate": "0"}
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": PROMPT}], "stream": True}


def tls_client(server: RefServer, *, http2: bool = False) -> httpx.Client:
    assert server.ca is not None
    context = ssl.create_default_context(cafile=server.ca)
    return httpx.Client(verify=context, http2=http2, http1=not http2, timeout=10.0)


@pytest.fixture
def h1(refserver_tls: RefServer) -> Iterator[httpx.Client]:
    with tls_client(refserver_tls) as client:
        yield client


def expected_text(n: int) -> str:
    return "".join(answer_tokens(n))


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_chat_completions_stream_has_role_chunk_tokens_finish_usage_and_done(
    refserver_tls: RefServer, http2: bool
) -> None:
    body = {**CHAT, "stream_options": {"include_usage": True}}
    with tls_client(refserver_tls, http2=http2) as client:
        got = collect(
            client,
            refserver_tls.path("/v1/chat/completions"),
            body,
            {**FAST, "x-promptpath-tokens": "7"},
        )
    assert got.error is None
    assert got.status == 200
    assert got.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    assert got.headers["content-type"].startswith("text/event-stream")
    messages = got.stream.data_messages
    assert messages[-1].data == "[DONE]"
    chunks = [m.json() for m in messages[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    content = [c["choices"][0]["delta"]["content"] for c in chunks[1:8]]
    assert "".join(content) == expected_text(7)
    assert chunks[8]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }
    assert chunks[9]["choices"] == []
    assert chunks[9]["usage"]["completion_tokens"] == 7
    assert len(chunks) == 10
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_every_event_carries_a_monotonic_server_send_time(
    h1: httpx.Client, refserver_tls: RefServer
) -> None:
    before = time.time_ns()
    got = collect(
        h1,
        refserver_tls.path("/v1/messages"),
        {**CHAT, "max_tokens": 64},
        {"x-promptpath-tokens": "10", "x-promptpath-rate": "200"},
    )
    after = time.time_ns()
    stamps = [m.json()["promptpath"] for m in got.stream.data_messages]
    assert [s["seq"] for s in stamps] == list(range(len(stamps)))
    sent = [s["sent_unix_ns"] for s in stamps]
    assert sent == sorted(sent)
    assert before - 50_000_000 <= sent[0] and sent[-1] <= after + 50_000_000  # same host clock
    # 10 tokens at 200/s: the send times span the cadence, they are not all one instant
    assert (sent[-1] - sent[0]) / 1e6 >= 35


def test_max_tokens_cuts_the_answer_and_reports_length(
    h1: httpx.Client, refserver_tls: RefServer
) -> None:
    got = collect(h1, refserver_tls.path("/v1/chat/completions"), {**CHAT, "max_tokens": 5}, FAST)
    chunks = [m.json() for m in got.stream.data_messages[:-1]]
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == 5
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


# -- the official SDKs ---------------------------------------------------------------------


def test_openai_sdk_streams_chat_completions(refserver_tls: RefServer) -> None:
    with sdk_http_client(openai, refserver_tls, http2=True) as http:
        client = openai.OpenAI(
            base_url=refserver_tls.path("/v1"),
            api_key="sk-test",
            http_client=http,
            max_retries=0,
            default_headers=FAST,
        )
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": PROMPT}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected_text(32)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 32
    # the extra key is carried as an extra field, not an error
    assert (chunks[0].model_extra or {}).get("promptpath", {}).get("seq") == 0


def test_openai_sdk_non_streaming_chat_completion(refserver_tls: RefServer) -> None:
    with sdk_http_client(openai, refserver_tls) as http:
        client = openai.OpenAI(
            base_url=refserver_tls.path("/v1"),
            api_key="sk-test",
            http_client=http,
            max_retries=0,
            default_headers=FAST,
        )
        completion = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": PROMPT}], max_tokens=12
        )
    assert completion.choices[0].message.content == expected_text(12)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 12


def test_openai_sdk_streams_responses(refserver_tls: RefServer) -> None:
    def responses(http: Any) -> Any:
        client = openai.OpenAI(
            base_url=refserver_tls.path("/v1"),
            api_key="sk-test",
            http_client=http,
            max_retries=0,
            default_headers=FAST,
        )
        return client.responses

    # One client per request (sdk_http_client keeps no idle connection either: hypercorn's
    # 5 s keep-alive close raced a reused connection, 4 times in 29 beside six CPU hogs).
    with sdk_http_client(openai, refserver_tls, http2=True) as http:
        events = list(responses(http).create(model="gpt-4o-mini", input=PROMPT, stream=True))
    with (
        sdk_http_client(openai, refserver_tls, http2=True) as http,
        responses(http).stream(model="gpt-4o-mini", input=PROMPT) as stream,
    ):
        helper_text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    types = [e.type for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == expected_text(32) == helper_text == final.output_text
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.usage is not None and completed.response.usage.output_tokens == 32


def test_responses_cut_by_max_output_tokens_end_incomplete(
    h1: httpx.Client, refserver_tls: RefServer
) -> None:
    body = {"model": "gpt-4o-mini", "input": PROMPT, "stream": True, "max_output_tokens": 4}
    got = collect(h1, refserver_tls.path("/v1/responses"), body, FAST)
    last = got.stream.data_messages[-1]
    assert last.event == "response.incomplete"
    assert last.json()["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_anthropic_sdk_streams_messages(refserver_tls: RefServer) -> None:
    with sdk_http_client(anthropic, refserver_tls, http2=True) as http:
        client = anthropic.Anthropic(
            base_url=refserver_tls.url,
            api_key="sk-ant-test",
            http_client=http,
            max_retries=0,
            default_headers=FAST,
        )
        with client.messages.stream(
            model="claude-3-5-haiku-latest",
            max_tokens=20,
            messages=[{"role": "user", "content": PROMPT}],
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        raw = list(
            client.messages.create(
                model="claude-3-5-haiku-latest",
                max_tokens=64,
                messages=[{"role": "user", "content": PROMPT}],
                stream=True,
            )
        )
    assert text == expected_text(20)
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 20 and final.usage.input_tokens > 0
    types = [e.type for e in raw]
    assert types[:2] == ["message_start", "content_block_start"]
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert types.count("content_block_delta") == 32


def test_anthropic_stream_carries_a_ping(h1: httpx.Client, refserver_tls: RefServer) -> None:
    got = collect(h1, refserver_tls.path("/v1/messages"), {**CHAT, "max_tokens": 3}, FAST)
    assert [m.event for m in got.stream.data_messages] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_ollama_streams_ndjson_by_default(h1: httpx.Client, refserver_tls: RefServer) -> None:
    body = {"model": "llama3.2", "messages": [{"role": "user", "content": PROMPT}]}
    got = collect(
        h1, refserver_tls.path("/api/chat"), body, {**FAST, "x-promptpath-tokens": "6"}, sse=False
    )
    assert got.headers["content-type"] == "application/x-ndjson"
    lines = [m.json() for m in got.stream.data_messages]
    assert len(lines) == 7
    assert all(line["done"] is False for line in lines[:-1])
    assert "".join(line["message"]["content"] for line in lines[:-1]) == expected_text(6)
    final = lines[-1]
    assert final["done"] is True and final["done_reason"] == "stop"
    assert final["eval_count"] == 6 and final["prompt_eval_count"] > 0
    assert final["total_duration"] > 0


@pytest.mark.parametrize(
    ("path", "body", "text_of"),
    [
        (
            "/v1/responses",
            {"model": "m", "input": PROMPT},
            lambda d: d["output"][0]["content"][0]["text"],
        ),
        (
            "/v1/messages",
            {"model": "m", "max_tokens": 50, "messages": []},
            lambda d: d["content"][0]["text"],
        ),
        (
            "/api/chat",
            {"model": "m", "stream": False, "messages": []},
            lambda d: d["message"]["content"],
        ),
    ],
    ids=["responses", "anthropic", "ollama"],
)
def test_non_streaming_answers_are_one_json_object(
    h1: httpx.Client, refserver_tls: RefServer, path: str, body: dict[str, Any], text_of: Any
) -> None:
    response = h1.post(
        refserver_tls.path(path), json=body, headers={**FAST, "x-promptpath-tokens": "9"}
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    data = response.json()
    assert text_of(data) == expected_text(9)
    assert data["promptpath"]["seq"] == 0


def test_plain_endpoint_speaks_http11_without_tls(refserver_plain: RefServer) -> None:
    assert refserver_plain.url.startswith("http://127.0.0.1:")
    assert refserver_plain.ca is None and not refserver_plain.http3
    with httpx.Client(timeout=10.0) as client:
        got = collect(client, refserver_plain.path("/v1/chat/completions"), CHAT, FAST)
        assert client.get(refserver_plain.path("/healthz")).text == "ok"
    assert got.http_version == "HTTP/1.1"
    assert got.headers.get("transfer-encoding") == "chunked"
    assert "alt-svc" not in got.headers
    assert got.stream.data_messages[-1].data == "[DONE]"


async def test_http3_answers_on_the_same_port_number_as_tcp(refserver_tls: RefServer) -> None:
    with tls_client(refserver_tls) as client:
        alt_svc = client.get(refserver_tls.path("/healthz")).headers["alt-svc"]
    assert f'h3=":{refserver_tls.port}"' in alt_svc
    body = json.dumps({**CHAT, "max_tokens": 4}).encode()
    response = await h3_request(
        refserver_tls.port,
        "/v1/chat/completions",
        body=body,
        headers=[("content-type", "application/json"), *FAST.items()],
        ca=refserver_tls.ca,
    )
    assert response.status == 200
    stream = StreamCollector()
    stream.feed(response.body)
    assert stream.data_messages[-1].data == "[DONE]"
    content = [
        m.json()["choices"][0]["delta"].get("content", "")
        for m in stream.data_messages[1:-1]
        if m.json()["choices"]
    ]
    assert "".join(content) == expected_text(4)
    # and the UDP port really is taken by the server
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with pytest.raises(OSError):
        probe.bind(("127.0.0.1", refserver_tls.port))
    probe.close()

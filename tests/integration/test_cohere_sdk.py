"""The official cohere SDK reads the reference endpoint's Cohere v2 emulation back: the
text, reasoning and usage serve meant, and its in-band error as the SDK hands it on.

cohere 7.3.1 ClientV2.chat_stream (httpx) against base_url on loopback, with an httpx
client that trusts the test CA (HTTP/1.1 as the SDK builds it, HTTP/2 when the
application's httpx client asks for it).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import cohere
import httpx
import pytest

from promptpath.server.tokens import answer_tokens
from tests.helpers.refserver import RefServer, reference_server

PROMPT = "Why does my BGP session keep flapping?"
KEY = "co-sdk-test"
FAST = {"x-promptpath-rate": "0"}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """Demands the key: a streamed answer proves the SDK's bearer token is accepted."""
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("keyed-cohere"),
        extra_args=["--api-key-env", "PP_TEST_SERVER_KEY"],
        env={"PP_TEST_SERVER_KEY": KEY},
    ) as server:
        yield server


def stream(server: RefServer, *, key: str = KEY, http2: bool = False, **headers: str) -> list[Any]:
    """One chat_stream, its connection closed after (a kept-alive one holds serve's exit)."""
    assert server.ca is not None
    context = ssl.create_default_context(cafile=server.ca)
    with httpx.Client(verify=context, http2=http2, timeout=10.0) as http:
        co = cohere.ClientV2(api_key=key, base_url=server.url, httpx_client=http)
        return list(
            co.chat_stream(
                model="command-a-03-2025",
                messages=[{"role": "user", "content": PROMPT}],
                max_tokens=7,
                request_options={"additional_headers": {**FAST, **headers}, "max_retries": 0},
            )
        )


def texts(events: list[Any], field: str) -> str:
    return "".join(
        getattr(e.delta.message.content, field) or "" for e in events if e.type == "content-delta"
    )


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_chat_stream_receives_the_text_and_usage_serve_meant(keyed: RefServer, http2: bool) -> None:
    events = stream(keyed, http2=http2)
    assert [e.type for e in events[:2]] == ["message-start", "content-start"]
    assert texts(events, "text") == "".join(answer_tokens(7))
    end = events[-1]
    assert end.type == "message-end" and end.delta.finish_reason == "MAX_TOKENS"
    assert end.delta.error is None
    usage = end.delta.usage
    assert usage.tokens.output_tokens == 7 and usage.billed_units.output_tokens == 7
    assert usage.tokens.input_tokens and usage.tokens.input_tokens >= 5


def test_chat_stream_reads_the_reasoning_as_a_thinking_block_before_the_text(
    keyed: RefServer,
) -> None:
    events = stream(keyed, **{"x-promptpath-reasoning": "3"})
    tokens = answer_tokens(7)
    assert texts(events, "thinking") == "".join(tokens[:3])
    assert texts(events, "text") == "".join(tokens[3:])
    starts = [e.delta.message.content.type for e in events if e.type == "content-start"]
    assert starts == ["thinking", "text"]
    assert [e.index for e in events if e.type == "content-end"] == [0, 1]


def test_the_in_band_error_is_a_message_end_carrying_it(keyed: RefServer) -> None:
    # cohere 7.3.1 raises nothing mid-stream: the application sees delta.error.
    events = stream(keyed, **{"x-promptpath-error-after": "2"})
    assert texts(events, "text") == "".join(answer_tokens(2))
    end = events[-1]
    assert end.type == "message-end" and end.delta.finish_reason == "ERROR"
    assert end.delta.error and "internal server error" in end.delta.error
    assert end.delta.usage.tokens.output_tokens == 2


def test_a_wrong_key_is_the_sdk_s_unauthorized_error(keyed: RefServer) -> None:
    with pytest.raises(cohere.UnauthorizedError) as info:
        stream(keyed, key="wrong")
    assert info.value.status_code == 401
    assert info.value.body["message"] == "invalid api token"


def test_a_429_answer_is_the_sdk_s_too_many_requests(keyed: RefServer) -> None:
    with pytest.raises(cohere.TooManyRequestsError) as info:
        stream(keyed, **{"x-promptpath-status": "429"})
    assert "Trial key" in str(info.value.body)

"""The official SDKs read the cached input tokens of the reference endpoint's --prefix-cache,
each in its API's own usage field: the proof that the emulation reports them as the real
APIs do (openai 2.x, anthropic, google-genai, boto3 as installed; see their own tests).

Each test sends one prompt twice; the second finds its prefix remembered. A prompt of 230
words plus the few strings the SDK's body adds (the role) makes 4 whole blocks of 48 words
(server/prefill.py): 192 words, 256 tokens cached (4/3 tokens per word).

Anthropic and Bedrock Converse cache only a prefix the request marks (``cache_control``,
``cachePoint``) and only from a minimum length (1,024 tokens in the emulation): there the
prompt is 800 words, marked, and the whole marked prefix is written, then read.
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Iterator
from typing import Any

import anthropic
import boto3
import openai
import pytest
from botocore.config import Config
from google import genai
from google.genai import types

from tests.helpers.refserver import RefServer, reference_server, sdk_http_client

AKID = "AKIDPROMPTPATHTEST"
SECRET = "pp-test-secret-DO-NOT-LEAK-0d5e9a"
CACHED = 256
FAST = {"x-promptpath-rate": "0", "x-promptpath-tokens": "3"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("prefix-cache"),
        extra_args=["--prefix-cache", "--aws-test-credentials", f"{AKID}:{SECRET}"],
    ) as server:
        yield server


#: A marked prompt: 800 words (the first new), 1,067 tokens, over the emulation's minimum.
MARKED_WORDS = 800


def _twice(send: Any, words: int = 230) -> tuple[Any, Any]:
    prompt = " ".join([secrets.token_hex(4), *(["filler"] * (words - 1))])
    return send(prompt), send(prompt)


def test_openai_sdk_reads_prompt_tokens_details_cached_tokens(cache: RefServer) -> None:
    with sdk_http_client(openai, cache) as http:
        client = openai.OpenAI(
            base_url=cache.path("/v1"), api_key="sk-test", http_client=http, default_headers=FAST
        )

        def send(prompt: str) -> Any:
            chunks = list(
                client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "user", "content": prompt}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
            return chunks[-1].usage

        first, second = _twice(send)
    assert first.prompt_tokens_details is None  # nothing cached: the field is left out
    assert second.prompt_tokens_details.cached_tokens == CACHED
    assert second.prompt_tokens == first.prompt_tokens  # cached ones count inside it


def test_openai_sdk_reads_responses_input_tokens_details(cache: RefServer) -> None:
    with sdk_http_client(openai, cache) as http:
        client = openai.OpenAI(
            base_url=cache.path("/v1"), api_key="sk-test", http_client=http, default_headers=FAST
        )

        def send(prompt: str) -> Any:
            events = list(client.responses.create(model="gpt-4o-mini", input=prompt, stream=True))
            return events[-1].response.usage

        first, second = _twice(send)
    assert first.input_tokens_details.cached_tokens == 0
    assert second.input_tokens_details.cached_tokens == CACHED


def _anthropic_usages(cache: RefServer, *, marked: bool, words: int) -> tuple[Any, Any]:
    with sdk_http_client(anthropic, cache) as http:
        client = anthropic.Anthropic(
            base_url=cache.url, api_key="sk-ant-test", http_client=http, default_headers=FAST
        )

        def send(prompt: str) -> Any:
            block: dict[str, Any] = {"type": "text", "text": prompt}
            if marked:
                block["cache_control"] = {"type": "ephemeral"}
            with client.messages.stream(
                model="claude-3-5-haiku-latest",
                max_tokens=8,
                messages=[{"role": "user", "content": [block]}],
            ) as stream:
                return stream.get_final_message().usage

        return _twice(send, words)


def test_anthropic_sdk_reads_cache_creation_then_cache_read_input_tokens(
    cache: RefServer,
) -> None:
    first, second = _anthropic_usages(cache, marked=True, words=MARKED_WORDS)
    # The SDK's body adds "user" and "text" and the mark's "ephemeral": 803 words, all
    # of them up to the marked block's end, 1,071 tokens (4/3 per word).
    marked = (803 * 4 + 2) // 3
    assert first.cache_creation_input_tokens == marked
    assert first.cache_read_input_tokens == 0
    assert second.cache_creation_input_tokens == 0
    assert second.cache_read_input_tokens == marked
    # Anthropic counts the cache's tokens outside input_tokens.
    assert first.input_tokens == second.input_tokens == 0


def test_anthropic_emulation_caches_no_unmarked_prompt(cache: RefServer) -> None:
    """Anthropic caches only what a request marks: the same long prompt twice, unmarked,
    is read and written by nobody (as the fit of the prefill probe would see it)."""
    first, second = _anthropic_usages(cache, marked=False, words=MARKED_WORDS)
    for usage in (first, second):
        assert usage.cache_read_input_tokens == 0
        assert usage.cache_creation_input_tokens == 0
    assert second.input_tokens == first.input_tokens > 1000


def test_anthropic_emulation_caches_no_marked_prefix_under_the_minimum(cache: RefServer) -> None:
    first, second = _anthropic_usages(cache, marked=True, words=230)
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens == 0


def test_google_genai_reads_cached_content_token_count(cache: RefServer) -> None:
    assert cache.ca is not None
    client = genai.Client(
        api_key="k-sdk-test",
        http_options=types.HttpOptions(
            base_url=cache.url,
            headers=FAST,
            client_args={"verify": ssl.create_default_context(cafile=cache.ca)},
            retry_options=types.HttpRetryOptions(attempts=1),
        ),
    )

    def send(prompt: str) -> Any:
        chunks = list(
            client.models.generate_content_stream(model="gemini-2.5-flash", contents=prompt)
        )
        return chunks[-1].usage_metadata

    first, second = _twice(send)
    assert first.cached_content_token_count is None
    assert second.cached_content_token_count == CACHED
    assert second.prompt_token_count == first.prompt_token_count  # inside it


def test_boto3_reads_cache_write_then_cache_read_input_tokens(cache: RefServer) -> None:
    bedrock = boto3.session.Session(
        aws_access_key_id=AKID, aws_secret_access_key=SECRET, region_name="us-east-1"
    ).client(
        "bedrock-runtime",
        endpoint_url=f"https://localhost:{cache.port}",
        verify=cache.ca,
        config=Config(retries={"max_attempts": 1}),
    )

    def add_controls(request: Any, **_: Any) -> None:  # before signing: they are signed too
        request.headers["connection"] = "close"
        for name, value in FAST.items():
            request.headers[name] = value

    bedrock.meta.events.register("before-sign.bedrock-runtime.*", add_controls)

    def send(prompt: str) -> Any:
        stream = bedrock.converse_stream(
            modelId="anthropic.claude-3-haiku-20240307-v1:0",
            messages=[
                {
                    "role": "user",
                    "content": [{"text": prompt}, {"cachePoint": {"type": "default"}}],
                }
            ],
        )["stream"]
        return next(e["metadata"]["usage"] for e in stream if "metadata" in e)

    first, second = _twice(send, MARKED_WORDS)
    # The body's "user" and the point's "default": 802 words before the point's end.
    marked = (802 * 4 + 2) // 3
    assert "cacheReadInputTokens" not in first
    assert first["cacheWriteInputTokens"] == marked
    assert second["cacheReadInputTokens"] == marked
    assert "cacheWriteInputTokens" not in second
    assert first["inputTokens"] == second["inputTokens"] == 0  # outside it

"""The official SDKs read the reference endpoint's Gemini, Vertex and Azure OpenAI
emulation back: the text and usage it meant to send, its in-band error as the SDK's own
exception. That is the proof the emulation is the real format.

google-genai 3.6.1 (httpx2, HTTP/1.1) streams generate_content against http_options
base_url on loopback; openai's AzureOpenAI against azure_endpoint on loopback.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from google.oauth2.credentials import Credentials

from promptpath.server.tokens import answer_tokens
from tests.helpers.refserver import RefServer, reference_server, sdk_http_client

PROMPT = "Why does my BGP session keep flapping?"
KEY = "k-sdk-test"
FAST = {"x-promptpath-rate": "0"}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """Demands the key: a streamed answer proves the SDK's auth header is accepted."""
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("keyed-sdks"),
        extra_args=["--api-key-env", "PP_TEST_SERVER_KEY"],
        env={"PP_TEST_SERVER_KEY": KEY},
    ) as server:
        yield server


def http_options(server: RefServer, **headers: str) -> types.HttpOptions:
    assert server.ca is not None
    return types.HttpOptions(
        base_url=server.url,
        headers={**FAST, **headers},
        client_args={"verify": ssl.create_default_context(cafile=server.ca)},
        retry_options=types.HttpRetryOptions(attempts=1),
    )


def gemini(server: RefServer, **headers: str) -> genai.Client:
    return genai.Client(api_key=KEY, http_options=http_options(server, **headers))


def vertex(server: RefServer, **headers: str) -> genai.Client:
    return genai.Client(
        vertexai=True,
        project="p1",
        location="us-central1",
        credentials=Credentials(token=KEY),  # type: ignore[no-untyped-call]
        http_options=http_options(server, **headers),
    )


CONFIG = types.GenerateContentConfig(max_output_tokens=9)


@pytest.mark.parametrize("make", [gemini, vertex], ids=["gemini", "vertex"])
def test_google_genai_streams_the_text_and_usage_serve_meant(keyed: RefServer, make) -> None:  # type: ignore[no-untyped-def]
    client = make(keyed)
    chunks = list(
        client.models.generate_content_stream(
            model="gemini-2.5-flash", contents=PROMPT, config=CONFIG
        )
    )
    assert "".join(c.text or "" for c in chunks) == "".join(answer_tokens(9))
    last = chunks[-1]
    assert last.candidates and last.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    usage = last.usage_metadata
    assert usage is not None and usage.candidates_token_count == 9
    assert usage.prompt_token_count and usage.prompt_token_count >= 5
    assert last.model_version == "gemini-2.5-flash"
    # Each client went to its own API's path (Vertex: v1beta1/projects/.../publishers/...).
    assert keyed.ca is not None
    stats = httpx.get(keyed.path("/stats"), verify=ssl.create_default_context(cafile=keyed.ca))
    record = stats.json()["recent"][-1]
    path = record["path"]
    assert record["dialect"] == ("vertex" if make is vertex else "gemini")
    where = (
        "/projects/p1/locations/us-central1/publishers/google/models/"
        if make is vertex
        else "/models/"
    )
    assert where in path and path.endswith("gemini-2.5-flash:streamGenerateContent")


def test_google_genai_raises_its_api_error_on_the_in_band_error(keyed: RefServer) -> None:
    client = gemini(keyed, **{"x-promptpath-error-after": "3"})
    got: list[str] = []
    with pytest.raises(genai_errors.ServerError) as info:
        for chunk in client.models.generate_content_stream(
            model="gemini-2.5-flash", contents=PROMPT, config=CONFIG
        ):
            got.append(chunk.text or "")
    assert "".join(got) == "".join(answer_tokens(3))
    assert info.value.code == 500 and info.value.status == "INTERNAL"


def test_google_genai_reads_the_plain_json_error_answer(keyed: RefServer) -> None:
    client = gemini(keyed, **{"x-promptpath-status": "429"})
    with pytest.raises(genai_errors.ClientError) as info:
        list(client.models.generate_content_stream(model="gemini-2.5-flash", contents=PROMPT))
    assert info.value.code == 429 and info.value.status == "RESOURCE_EXHAUSTED"


def test_google_genai_with_a_wrong_key_gets_the_401(keyed: RefServer) -> None:
    client = genai.Client(api_key="wrong", http_options=http_options(keyed))
    with pytest.raises(genai_errors.ClientError) as info:
        list(client.models.generate_content_stream(model="gemini-2.5-flash", contents=PROMPT))
    assert info.value.code == 401


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_azure_openai_streams_text_usage_and_filter_chunks(keyed: RefServer, http2: bool) -> None:
    with sdk_http_client(openai, keyed, http2=http2) as http:
        client = openai.AzureOpenAI(
            azure_endpoint=keyed.url,
            api_key=KEY,
            api_version="2024-10-21",
            http_client=http,
            max_retries=0,
            default_headers=FAST,
        )
        chunks = list(
            client.chat.completions.create(
                model="prod-gpt",
                messages=[{"role": "user", "content": PROMPT}],
                max_tokens=6,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "".join(answer_tokens(6))
    # The prompt-filter chunk comes first, with no choices; the SDK keeps its field.
    first = chunks[0].model_dump()
    assert first["choices"] == [] and first["prompt_filter_results"][0]["prompt_index"] == 0
    verdicts = [
        c
        for c in chunks
        if c.choices and c.model_dump()["choices"][0].get("content_filter_offsets")
    ]
    assert len(verdicts) == 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    assert {c.model for c in chunks if c.choices} == {"prod-gpt"}


def test_azure_openai_raises_on_the_in_band_error(keyed: RefServer) -> None:
    with sdk_http_client(openai, keyed) as http:
        client = openai.AzureOpenAI(
            azure_endpoint=keyed.url,
            api_key=KEY,
            api_version="2024-10-21",
            http_client=http,
            max_retries=0,
            default_headers={**FAST, "x-promptpath-error-after": "2"},
        )
        with pytest.raises(openai.APIError):
            for _ in client.chat.completions.create(
                model="prod-gpt", messages=[{"role": "user", "content": PROMPT}], stream=True
            ):
                pass


def test_google_genai_fails_on_an_sse_comment_line(keyed: RefServer) -> None:
    # Observed by hand first: google-genai 3.6.1 reads only "data: " lines as events and
    # hands any other line to a JSON brace matcher, so a keepalive comment (which the
    # Gemini API never sends, but a hop may inject) ends the stream with
    # UnknownApiResponseError. serve sends comments only when asked (keepalive-s).
    client = gemini(
        keyed,
        **{
            "x-promptpath-pause-after": "2",
            "x-promptpath-pause-s": "1.2",
            "x-promptpath-keepalive-s": "0.5",
        },
    )
    with pytest.raises(genai_errors.UnknownApiResponseError, match="keepalive"):
        list(client.models.generate_content_stream(model="gemini-2.5-flash", contents=PROMPT))

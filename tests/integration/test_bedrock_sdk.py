"""boto3 reads the reference endpoint's Bedrock emulation back, its SigV4 signature checked.

boto3's ``bedrock-runtime`` client (1.44.8: urllib3, HTTP/1.1, botocore's eventstream
parser with both CRCs checked) against ``endpoint_url`` on loopback, with test
credentials the endpoint verifies (``--aws-test-credentials``): the text and usage it meant
to send, each mid-stream exception as boto3's own ``EventStreamError`` with its code, and
a wrong secret refused with AWS's 403. That is the proof the emulation is the real format
and that the endpoint's signature check is AWS's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError

from promptpath.dialects.bedrock.emulation import CONVERSE_EXCEPTIONS, EXCEPTIONS, INVOKE_EXCEPTIONS
from promptpath.server.tokens import answer_tokens
from tests.helpers.refserver import RefServer, reference_server

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
AKID = "AKIDPROMPTPATHTEST"
SECRET = "pp-test-secret-DO-NOT-LEAK-0d5e9a"
PROMPT = "Why does my BGP session keep flapping?"


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("bedrock-sdk"),
        extra_args=["--aws-test-credentials", f"{AKID}:{SECRET}", "--rate", "0"],
    ) as server:
        yield server


def client(server: RefServer, secret: str = SECRET, **controls: str) -> Any:
    bedrock = boto3.session.Session(
        aws_access_key_id=AKID, aws_secret_access_key=secret, region_name="us-east-1"
    ).client(
        "bedrock-runtime",
        endpoint_url=f"https://localhost:{server.port}",
        verify=server.ca,
        config=Config(retries={"max_attempts": 1}),
    )

    def add_controls(request: Any, **_: Any) -> None:  # before signing: they are signed too
        # A kept-alive TLS connection that an unread error response left checked out
        # held serve's shutdown 5 s (observed): each request closes its connection.
        request.headers["connection"] = "close"
        for name, value in controls.items():
            request.headers[f"x-promptpath-{name.replace('_', '-')}"] = value

    bedrock.meta.events.register("before-sign.bedrock-runtime.*", add_controls)
    return bedrock


def converse(bedrock: Any) -> Any:
    return bedrock.converse_stream(
        modelId=MODEL,
        messages=[{"role": "user", "content": [{"text": PROMPT}]}],
        inferenceConfig={"maxTokens": 64},
    )["stream"]


def invoke(bedrock: Any) -> Any:
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    return bedrock.invoke_model_with_response_stream(
        modelId=MODEL,
        body=json.dumps(body),
        contentType="application/json",
        accept="application/json",
    )["body"]


def test_converse_stream_receives_the_text_and_usage_serve_meant(signed: RefServer) -> None:
    events = list(converse(client(signed, tokens="7")))
    text = "".join(
        e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e
    )
    assert text == "".join(answer_tokens(7))
    assert next(iter(events[0])) == "messageStart"
    stop = next(e["messageStop"] for e in events if "messageStop" in e)
    assert stop["stopReason"] == "end_turn"
    metadata = events[-1]["metadata"]
    assert metadata["usage"]["outputTokens"] == 7
    assert metadata["usage"]["inputTokens"] > 0
    assert isinstance(metadata["metrics"]["latencyMs"], int)


def test_invoke_with_response_stream_receives_claudes_events(signed: RefServer) -> None:
    chunks = [json.loads(e["chunk"]["bytes"]) for e in invoke(client(signed, tokens="5"))]
    text = "".join(c["delta"]["text"] for c in chunks if c["type"] == "content_block_delta")
    assert text == "".join(answer_tokens(5))
    assert chunks[-1]["type"] == "message_stop"
    metrics = chunks[-1]["amazon-bedrock-invocationMetrics"]
    assert metrics["outputTokenCount"] == 5
    usage = next(c["usage"] for c in chunks if c["type"] == "message_delta")
    assert usage["output_tokens"] == 5


@pytest.mark.parametrize(
    ("path", "name"),
    [(converse, n) for n in CONVERSE_EXCEPTIONS] + [(invoke, n) for n in INVOKE_EXCEPTIONS],
    ids=[f"converse-{n}" for n in CONVERSE_EXCEPTIONS] + [f"invoke-{n}" for n in INVOKE_EXCEPTIONS],
)
def test_each_exception_is_boto3s_event_stream_error_after_the_tokens(
    signed: RefServer, path: Callable[[Any], Any], name: str
) -> None:
    got: list[Any] = []
    with pytest.raises(EventStreamError) as err:
        for event in path(client(signed, tokens="6", error_after="2", error_type=name)):
            got.append(event)
    assert err.value.response["Error"]["Code"] == name
    assert err.value.response["Error"]["Message"] == EXCEPTIONS[name]
    assert len(got) >= 2  # the tokens before it arrived


def test_a_wrong_secret_is_refused_as_aws_refuses_it(signed: RefServer) -> None:
    with pytest.raises(ClientError) as err:
        converse(client(signed, secret=SECRET + "x"))
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert err.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert "signature we calculated does not match" in err.value.response["Error"]["Message"]

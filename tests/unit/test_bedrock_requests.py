"""Bedrock requests as boto3 sends them: detection, body, headers, SigV4, credentials.

Facts observed on loopback with boto3 1.44.8 (a socket that printed what arrived):
POST /model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream HTTP/1.1 with
``Accept-Encoding: identity``, no Accept, ``Content-Type: application/json``,
``X-Amz-Date``, ``Authorization: AWS4-HMAC-SHA256 Credential=AKID/DATE/us-east-1/bedrock/
aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=…``, the body
``{"messages": [{"role": "user", "content": [{"text": "Hi there"}]}], "inferenceConfig":
{"maxTokens": 64}}``; invoke adds ``X-Amzn-Bedrock-Accept: application/json`` (signed too).
botocore 1.44.8 reads AWS_DEFAULT_REGION, not AWS_REGION (NoRegionError with only the latter).
"""

from __future__ import annotations

import builtins
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.errors import UsageError
from promptpath.dialects.bedrock import SIGNING_NAME, region_from_host
from promptpath.dialects.plugins import detect_provider, model_from_path
from promptpath.options import (
    AwsCredentials,
    RunOptions,
    parse_target,
    secret_values,
)
from promptpath.plan.aws_auth import EXTRA_HINT, load_credentials
from promptpath.server.sigv4_check import AwsTestKey, check_sigv4
from promptpath.tracer.request import key_sent, prepare, sent_request

CONVERSE = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
INVOKE = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke-with-response-stream"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN0123456789"


def creds(token: str | None = TOKEN) -> AwsCredentials:
    return AwsCredentials(
        access_key="AKIDEXAMPLE", secret_key=SECRET, token=token, region="us-west-2", source="t"
    )


def options(path: str = CONVERSE, **kw: Any) -> RunOptions:
    provider = detect_provider(path)
    assert provider is not None
    base: dict[str, Any] = {
        "target": parse_target(f"https://bedrock-runtime.us-west-2.amazonaws.com{path}"),
        "provider": provider,
        "model": model_from_path(provider, path) or "m",
        "client": "boto3",
        "prompt": "Hi there",
        "aws": creds(),
    }
    return RunOptions(**(base | kw))


def test_both_paths_are_detected_and_the_model_id_unquoted() -> None:
    assert detect_provider(CONVERSE) == "bedrock"
    assert detect_provider(INVOKE) == "bedrock-invoke"
    assert model_from_path("bedrock", CONVERSE) == "anthropic.claude-3-haiku-20240307-v1:0"
    arn = "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/converse-stream"
    assert model_from_path("bedrock", arn) == "arn:aws:bedrock:us-east-1:1:inference-profile/us.x"


@pytest.mark.parametrize(
    ("host", "region"),
    [
        ("bedrock-runtime.us-east-1.amazonaws.com", "us-east-1"),
        ("bedrock-runtime-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
        ("bedrock-runtime.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("127.0.0.1", None),
        ("bedrock-runtime.us-east-1.amazonaws.com.evil.example", None),
    ],
)
def test_the_region_comes_from_the_host(host: str, region: str | None) -> None:
    assert region_from_host(host) == region


def test_the_converse_body_and_headers_are_boto3s() -> None:
    prepared = prepare(options())
    assert json.loads(prepared.body) == {
        "messages": [{"role": "user", "content": [{"text": "Hi there"}]}],
        "inferenceConfig": {"maxTokens": 64},
    }
    assert b'"messages": [{"role"' in prepared.body  # json.dumps' own spacing, as boto3's
    names = [n for n, _ in prepared.headers]
    assert "accept" not in names
    headers = dict(prepared.headers)
    assert headers["accept-encoding"] == "identity"
    assert headers["user-agent"].startswith("Boto3/1.44.8 md/Botocore#1.44.8")
    assert (
        headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        and "/us-west-2/bedrock/aws4_request" in headers["authorization"]
    )
    assert headers["x-amz-security-token"] == TOKEN
    assert prepared.expects == "application/vnd.amazon.eventstream"


def test_the_invoke_body_is_claudes_native_one_with_bedrocks_accept() -> None:
    prepared = prepare(options(INVOKE))
    assert json.loads(prepared.body) == {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Hi there"}],
    }
    headers = dict(prepared.headers)
    assert headers["x-amzn-bedrock-accept"] == "application/json"
    assert "x-amzn-bedrock-accept" in headers["authorization"]  # signed with the rest


def test_the_signature_covers_the_bytes_sent_as_an_independent_checker_sees_them() -> None:
    opts = options(body_controls=(("tokens", "3"),))
    prepared = prepare(opts)
    sent = [*prepared.headers, ("host", "bedrock-runtime.us-west-2.amazonaws.com")]
    check = AwsTestKey(access_key="AKIDEXAMPLE", secret_key=SECRET, token=TOKEN)

    def verdict(body: bytes, headers: list[tuple[str, str]] = sent) -> object:
        return check_sigv4(
            method="POST",
            raw_path=CONVERSE,
            query="",
            headers=headers,
            body=body,
            credentials=check,
            service=SIGNING_NAME,
            now=datetime.now(UTC),
        )

    assert verdict(prepared.body) is None
    assert verdict(prepared.body + b" ") is not None  # one byte more: refused
    other_host = [*prepared.headers, ("host", "127.0.0.1:8443")]
    assert verdict(prepared.body, other_host) is not None


def test_a_bearer_token_or_a_credential_header_replaces_sigv4() -> None:
    bearer = prepare(options(api_key="ABSKbedrockapikey0123456789"))
    assert dict(bearer.headers)["authorization"] == "Bearer ABSKbedrockapikey0123456789"
    assert "x-amz-date" not in dict(bearer.headers)
    given = prepare(options(headers=(("Authorization", "Bearer from-H"),)))
    assert [v for n, v in given.headers if n.lower() == "authorization"] == ["Bearer from-H"]
    assert key_sent(options()) and key_sent(options(aws=None, api_key="x" * 20))
    assert not key_sent(options(aws=None))


def test_the_recorded_request_redacts_the_signature_and_the_token() -> None:
    opts = options()
    prepared = prepare(opts)
    recorded = sent_request(opts, prepared)
    text = json.dumps(recorded.headers)
    signature = dict(prepared.headers)["authorization"].rsplit("=", 1)[1]
    assert signature not in text and TOKEN not in text and SECRET not in text
    assert recorded.key_sent
    # The secret key and the session token are secrets of the run (the access key id is
    # an identifier AWS prints in its own errors).
    assert {SECRET, TOKEN} <= set(secret_values(opts))
    assert "AKIDEXAMPLE" not in secret_values(opts)


# -- credentials, as botocore finds them --------------------------------------------------
def test_keys_from_the_environment() -> None:
    found = load_credentials(
        {"AWS_ACCESS_KEY_ID": "AKID1", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "eu-west-1"},
        "127.0.0.1",
    )
    assert found is not None
    assert (found.access_key, found.secret_key, found.region, found.source) == (
        "AKID1",
        SECRET,
        "eu-west-1",
        "env",
    )


def test_keys_from_a_profile_in_the_shared_files_and_the_host_region_first(
    tmp_path: Path,
) -> None:
    (tmp_path / "credentials").write_text(
        f"[default]\naws_access_key_id = AKID0\naws_secret_access_key = x{SECRET}\n"
        f"[work]\naws_access_key_id = AKIDW\naws_secret_access_key = {SECRET}\n"
        f"aws_session_token = {TOKEN}\n"
    )
    (tmp_path / "config").write_text("[profile work]\nregion = ap-south-1\n")
    env = {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_PROFILE": "work",
    }
    found = load_credentials(env, "127.0.0.1")
    assert found is not None
    assert (found.access_key, found.token, found.region) == ("AKIDW", TOKEN, "ap-south-1")
    assert found.source == "shared-credentials-file"
    in_host = load_credentials(env, "bedrock-runtime.us-east-2.amazonaws.com")
    assert in_host is not None and in_host.region == "us-east-2"


def test_keys_in_the_config_file_and_home(tmp_path: Path) -> None:
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text(
        "[default]\nregion = us-east-1\naws_access_key_id = AKIDC\n"
        f"aws_secret_access_key = {SECRET}\n"
    )
    found = load_credentials({"HOME": str(tmp_path)}, "127.0.0.1")
    assert found is not None and (found.access_key, found.source) == ("AKIDC", "config-file")


def test_no_source_is_no_credentials_and_keys_without_a_region_a_usage_error() -> None:
    assert load_credentials({}, "127.0.0.1") is None
    with pytest.raises(UsageError, match="no AWS region"):
        load_credentials({"AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "B"}, "127.0.0.1")


def test_without_botocore_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_botocore(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("botocore"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_botocore)
    with pytest.raises(UsageError) as err:
        load_credentials({"AWS_ACCESS_KEY_ID": "A"}, "127.0.0.1")
    assert err.value.message == EXTRA_HINT
    assert "promptpath[bedrock]" in EXTRA_HINT and "AWS_BEARER_TOKEN_BEDROCK" in EXTRA_HINT


# -- guardrails -------------------------------------------------------------------------
def test_a_guardrail_goes_where_each_api_takes_it() -> None:
    from promptpath.options import parse_guardrail

    converse = json.loads(prepare(options(guardrail=parse_guardrail("gr1:2"))).body)
    assert converse["guardrailConfig"] == {
        "guardrailIdentifier": "gr1",
        "guardrailVersion": "2",
        "streamProcessingMode": "sync",
    }
    invoke = prepare(options(INVOKE, guardrail=parse_guardrail("gr1:DRAFT:async")))
    headers = dict(invoke.headers)
    assert headers["x-amzn-bedrock-guardrailidentifier"] == "gr1"
    assert headers["x-amzn-bedrock-guardrailversion"] == "DRAFT"
    body = json.loads(invoke.body)
    assert body["amazon-bedrock-guardrailConfig"] == {"streamProcessingMode": "asynchronous"}
    for bad in ("gr1", "gr1:2:later", ":2", "gr 1:2"):
        with pytest.raises(UsageError, match="--guardrail"):
            parse_guardrail(bad)


def test_only_a_synchronous_guardrail_on_bedrock_is_a_provider_hold() -> None:
    from promptpath.options import parse_guardrail
    from promptpath.probes.buffering.probe import provider_hold

    assert provider_hold(options(guardrail=parse_guardrail("g:1"))) is not None
    assert provider_hold(options(guardrail=parse_guardrail("g:1:async"))) is None
    assert provider_hold(options()) is None
    header = (("X-Amzn-Bedrock-GuardrailIdentifier", "g"),)
    assert provider_hold(options(INVOKE, headers=header)) is not None

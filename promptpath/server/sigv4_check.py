"""The reference endpoint's SigV4 check: an AWS-style verdict on a signed request. Pure.

Written from the SigV4 specification (AWS "Create a signed AWS API request"), not with
botocore: the client signs with botocore, this checks independently, so a request signed
over the wrong bytes (a body changed after signing, a Host that is not the one sent, a
path encoded differently) fails here the way AWS would fail it, with a 403 and AWS's
own words.

The canonical request for a service other than S3 encodes the path twice: the path as
sent (``/model/anthropic.claude-v2%3A1/converse-stream``) is percent-encoded again
(``%253A``), with only ``/`` and ``~`` (and the unreserved characters) left as they are.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote

__all__ = ["ALGORITHM", "AwsTestKey", "SigV4Refusal", "check_sigv4", "parse_test_credentials"]

ALGORITHM = "AWS4-HMAC-SHA256"
#: How far X-Amz-Date may be from the server's clock (AWS: 5 minutes).
MAX_SKEW_S = 300.0

_MISMATCH = (
    "The request signature we calculated does not match the signature you provided."
    " Check your AWS Secret Access Key and signing method. Consult the service"
    " documentation for details."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AwsTestKey:
    """The one key the endpoint accepts (``serve --aws-test-credentials AKID:SECRET[:TOKEN]``)."""

    access_key: str
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SigV4Refusal:
    """Why a request is refused, as AWS says it (the x-amzn-ErrorType and the message)."""

    error_type: str
    message: str
    status: int = 403


def parse_test_credentials(spec: str) -> AwsTestKey:
    """``AKID:SECRET`` or ``AKID:SECRET:TOKEN`` (ValueError otherwise)."""
    parts = spec.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError("wants ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]")
    return AwsTestKey(
        access_key=parts[0], secret_key=parts[1], token=parts[2] if len(parts) == 3 else None
    )


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(pairs))


def _parse_authorization(value: str) -> dict[str, str] | None:
    if not value.startswith(ALGORITHM + " "):
        return None
    fields: dict[str, str] = {}
    for part in value[len(ALGORITHM) + 1 :].split(","):
        name, sep, text = part.strip().partition("=")
        if sep:
            fields[name] = text
    if not {"Credential", "SignedHeaders", "Signature"} <= fields.keys():
        return None
    return fields


def check_sigv4(
    *,
    method: str,
    raw_path: str,
    query: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    credentials: AwsTestKey,
    service: str,
    now: datetime,
) -> SigV4Refusal | None:
    """None when the request is signed by ``credentials`` for ``service`` (its AWS signing
    name) over exactly what arrived."""
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name.lower(), []).append(value)
    auth = _parse_authorization(",".join(values.get("authorization", [])))
    if auth is None:
        return SigV4Refusal(
            error_type="MissingAuthenticationTokenException", message="Missing Authentication Token"
        )
    scope = auth["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return SigV4Refusal(
            error_type="IncompleteSignatureException",
            message=f"Credential should be scoped correctly: {auth['Credential']}",
        )
    access_key, day, region, scoped, _ = scope
    if access_key != credentials.access_key:
        return SigV4Refusal(
            error_type="UnrecognizedClientException",
            message="The security token included in the request is invalid.",
        )
    amz_date = ",".join(values.get("x-amz-date", []))
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return SigV4Refusal(
            error_type="IncompleteSignatureException",
            message="Authorization header requires existence of either a 'X-Amz-Date' or a"
            " 'Date' header.",
        )
    if abs((now - signed_at).total_seconds()) > MAX_SKEW_S:
        return SigV4Refusal(
            error_type="InvalidSignatureException",
            message=f"Signature expired: {amz_date} is now earlier or later than the server's"
            " time by more than 5 minutes.",
        )
    signed = auth["SignedHeaders"].split(";")
    if "host" not in signed or day != amz_date[:8] or scoped != service:
        return SigV4Refusal(error_type="InvalidSignatureException", message=_MISMATCH)
    if credentials.token is not None:
        sent = ",".join(values.get("x-amz-security-token", []))
        if not hmac.compare_digest(sent, credentials.token) or "x-amz-security-token" not in signed:
            return SigV4Refusal(
                error_type="UnrecognizedClientException",
                message="The security token included in the request is invalid.",
            )
    canonical_headers = "".join(
        f"{name}:{','.join(' '.join(v.split()) for v in values.get(name, []))}\n" for name in signed
    )
    canonical = "\n".join(
        [
            method,
            quote(raw_path or "/", safe="/~"),
            _canonical_query(query),
            canonical_headers,
            auth["SignedHeaders"],
            hashlib.sha256(body).hexdigest(),
        ]
    )
    to_sign = "\n".join(
        [
            ALGORITHM,
            amz_date,
            f"{day}/{region}/{service}/aws4_request",
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = _hmac(("AWS4" + credentials.secret_key).encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, auth["Signature"]):
        return SigV4Refusal(error_type="InvalidSignatureException", message=_MISMATCH)
    return None

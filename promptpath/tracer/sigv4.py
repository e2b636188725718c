"""SigV4 for AWS requests (Bedrock's), by botocore's own signer (``botocore.auth.SigV4Auth``).

SigV4 is security code a well-kept library already does, and does the way AWS checks it
(the path encoded twice, header values trimmed, the body's SHA-256 in the canonical
request), so promptpath calls it rather than write its own. botocore is the optional
``[bedrock]`` extra: imported here only, when a Bedrock request is signed.

What is signed is the request as it goes on the wire: the same method, path and query,
the Host (or :authority) the transport will write, every header promptpath sends except
the ones botocore never signs (User-Agent among them), and the body's exact bytes. The
signing instant is read by botocore (``X-Amz-Date``): AWS refuses a signature more than
five minutes off its clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from promptpath.options import AwsCredentials

__all__ = ["sigv4_headers"]


def sigv4_headers(
    *,
    method: str,
    scheme: str,
    authority: str,
    path: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
    credentials: AwsCredentials,
    service: str,
) -> list[tuple[str, str]]:
    """The headers SigV4 adds (``x-amz-date``, ``x-amz-security-token``, ``authorization``)
    for the AWS service whose signing name is ``service``."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(
        method=method, url=f"{scheme}://{authority}{path}", data=body, headers=None
    )
    for name, value in headers:
        request.headers[name] = value
    request.headers["host"] = authority
    signer = SigV4Auth(
        Credentials(credentials.access_key, credentials.secret_key, credentials.token),
        service,
        credentials.region,
    )
    signer.add_auth(request)
    added = []
    for name in ("x-amz-date", "x-amz-security-token", "authorization"):
        value = request.headers.get(name)
        if value:
            added.append((name, str(value)))
    return added

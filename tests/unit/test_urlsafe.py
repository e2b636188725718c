"""URLs as shown: a credential leaves by its place in the URL, whatever its length."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptpath.core.urlsafe import (
    MARKER,
    redact_query,
    shown_authority,
    shown_path,
    shown_url,
    url_credentials,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # Userinfo, however short, and a URL with no path at all.
        ("http://pguser:P@127.0.0.1:9091", f"http://{MARKER}@127.0.0.1:9091"),
        ("https://u@h/x", f"https://{MARKER}@h/x"),
        # A password holding "@" (the last "@" ends the userinfo, as urlsplit reads it).
        ("http://a:b@c@h:1/p", f"http://{MARKER}@h:1/p"),
        # Key-like query values, as short as they come, the rest byte for byte.
        ("https://h/v1/x?api_key=Zq7Kp&m=a+b%20c", f"https://h/v1/x?api_key={MARKER}&m=a+b%20c"),
        ("https://h/x?Key=1&X-Amz-Signature=ab&flag", f"https://h/x?Key={MARKER}&X-Amz-Signature={MARKER}&flag"),
        # A name written percent-encoded is still that name.
        ("https://h/x?api%5Fkey=Zq7", f"https://h/x?api%5Fkey={MARKER}"),
        # The fragment is never sent: dropped, query-like or not.
        ("https://h/v1/x#token=FRAG", "https://h/v1/x"),
        ("https://h/v1/x?m=1#access_token=abc&x=y", "https://h/v1/x?m=1"),
        ("https://h#k", "https://h"),
        # Nothing to take out: the same text.
        ("https://h:8443/v1/chat/completions?model=m", "https://h:8443/v1/chat/completions?model=m"),
        ("wss://[::1]:9/realtime", "wss://[::1]:9/realtime"),
    ],
)  # fmt: skip
def test_shown_url_takes_each_credential_out_by_its_place(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@pytest.mark.parametrize(
    "url",
    ["http://u:Zq7@[::1", "http://u:Zq7@h:port/x", "ftp://u:Zq7@h", "//u:Zq7@h/p", "u:Zq7@h"],
)
def test_a_url_no_parser_takes_is_shown_safely_too(url: str) -> None:
    # The very input a usage error quotes: urlsplit raises on the first two.
    shown = shown_url(url) if "//" in url else shown_authority(url)
    assert "Zq7" not in shown and MARKER in shown


def test_a_proxy_given_without_a_scheme_loses_its_userinfo() -> None:
    assert shown_authority("alice:pw@127.0.0.1:3128") == f"{MARKER}@127.0.0.1:3128"
    assert shown_authority("127.0.0.1:3128") == "127.0.0.1:3128"
    assert shown_authority("http://alice:pw@p:1") == f"http://{MARKER}@p:1"


def test_a_request_target_keeps_its_path_and_loses_key_values_and_fragment() -> None:
    assert shown_path("/v1/x?key=a&model=m#t") == f"/v1/x?key={MARKER}&model=m"
    assert shown_path("/v1/x") == "/v1/x"
    assert redact_query("token&a=1&code=") == f"token&a=1&code={MARKER}"


def test_url_credentials_lists_every_spelling_a_client_sends() -> None:
    found = url_credentials("http://pg%40user:P%3Aw@h:9091")
    token = base64.b64encode(b"pg@user:P:w").decode()
    assert {"pg%40user:P%3Aw", "pg@user:P:w", "P:w", token, f"Basic {token}"} <= set(found)
    assert url_credentials("http://h:9091/x?key=1") == []


@given(st.text())
def test_shown_url_never_raises_and_never_keeps_a_userinfo(text: str) -> None:
    url = "http://" + text.replace("#", "") + "@h/"
    shown = shown_url(url)
    head = shown.split("/")[2]
    # Whatever the userinfo held, the authority shown starts with the marker (or the
    # "@" sat after a "/", "?" or "#": then it was no userinfo, and stays as it was).
    assert head.startswith(MARKER) or any(c in text for c in "/?")

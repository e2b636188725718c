"""HTTP/2 error codes in words (RFC 9113 section 7), as the terminal and JSON show them."""

from __future__ import annotations

from promptpath.net.http2 import error_code_name


def test_registered_codes_are_named_with_their_number() -> None:
    assert error_code_name(0) == "NO_ERROR (0)"
    assert error_code_name(8) == "CANCEL (8)"
    assert error_code_name(0xB) == "ENHANCE_YOUR_CALM (11)"


def test_an_unregistered_code_is_shown_as_a_number_not_a_crash() -> None:
    assert error_code_name(0x1234) == "unknown code 0x1234 (4660)"


def test_http3_codes_are_named_the_same_way() -> None:
    from promptpath.net.quic_protocol import h3_error_name

    assert h3_error_name(0x10C) == "H3_REQUEST_CANCELLED (0x10c)"
    assert h3_error_name(0x1F * 7 + 0x21) == f"unknown code 0x{0x1F * 7 + 0x21:x}"  # greased

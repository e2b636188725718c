"""Which Host headers the exporter answers when --listen names its host (the DNS-rebinding
check, service.py): pure parsing of the header and of --listen's host."""

from __future__ import annotations

import pytest

from promptpath.exporter.service import _host_name, _is_address, listen_name


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("localhost", "localhost"),
        ("Exporter.Internal.", "exporter.internal"),
        ("127.0.0.1", None),
        ("::1", None),
        ("", None),  # every interface: any Host
    ],
)
def test_only_a_listen_name_asks_for_a_host_check(host: str, name: str | None) -> None:
    assert listen_name(host) == name


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:9479", "localhost"),
        ("LOCALHOST.:9479", "localhost"),
        ("evil.example", "evil.example"),
        ("[::1]:9479", "::1"),
        ("[::1]", "::1"),
        ("127.0.0.1:9479", "127.0.0.1"),
        (" exporter.internal ", "exporter.internal"),
    ],
)
def test_the_host_header_is_read_without_its_port_case_or_trailing_dot(
    header: str, name: str
) -> None:
    assert _host_name(header) == name


def test_an_address_is_never_a_rebinding_page() -> None:
    assert _is_address("127.0.0.1") and _is_address("::1")
    assert not _is_address("localhost") and not _is_address("127.0.0.1.nip.io")

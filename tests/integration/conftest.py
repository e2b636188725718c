"""Reference-endpoint fixtures: real servers on 127.0.0.1 in subprocesses.

The shared servers are session-scoped: every behaviour a test needs is set per request
with ``x-promptpath-*`` headers, so tests do not disturb each other. A test that needs
different server flags (or exact /stats counts) starts its own with ``start_refserver``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.helpers.refserver import RefServer, reference_server

StartRefServer = Callable[..., RefServer]


@pytest.fixture(scope="session")
def refserver_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """TLS (h1/h2 via ALPN, plus h3 on the same UDP port), CA in ``.ca``."""
    with reference_server(
        tls=True, http3=True, tmp_path=tmp_path_factory.mktemp("refserver-tls")
    ) as server:
        yield server


@pytest.fixture(scope="session")
def refserver_plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """Plain HTTP/1.1, as an upstream behind a proxy sees it."""
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("refserver-plain")) as server:
        yield server


@pytest.fixture
def start_refserver(tmp_path: Path) -> Iterator[StartRefServer]:
    """Start a private server with its own flags: ``start_refserver(extra_args=[...])``."""
    counter = itertools.count()
    with contextlib.ExitStack() as stack:

        def start(
            *, tls: bool = True, http3: bool = False, extra_args: Sequence[str] = ()
        ) -> RefServer:
            index = next(counter)  # a fresh directory per server
            return stack.enter_context(
                reference_server(
                    tls=tls, http3=http3, extra_args=extra_args, tmp_path=tmp_path / f"srv{index}"
                )
            )

        yield start

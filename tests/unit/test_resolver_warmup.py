"""The system resolver's warm-up asks for "localhost" only when no DNS query can follow."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptpath.net.getaddrinfo import localhost_stays_local


@pytest.mark.parametrize(
    ("hosts", "nsswitch", "local"),
    [
        ("127.0.0.1\tlocalhost\n::1 localhost ip6-localhost\n", "hosts:  files dns\n", True),
        (
            "127.0.0.1 localhost.localdomain localhost # the usual\n",
            "hosts: files myhostname\n",
            True,
        ),
        ("127.0.0.1 localhost\n", "hosts: dns files\n", False),  # DNS would be asked first
        (
            "127.0.0.1 localhost\n",
            "passwd: files\n",
            False,
        ),  # no hosts line: glibc's default is dns first
        ("# 127.0.0.1 localhost\n10.0.0.1 box\n", "hosts: files dns\n", False),
        ("127.0.0.1 localhost6x\n", "hosts: files dns\n", False),
    ],
)
def test_localhost_is_asked_only_when_the_hosts_file_answers_first(
    tmp_path: Path, hosts: str, nsswitch: str, local: bool
) -> None:
    (tmp_path / "hosts").write_text(hosts)
    (tmp_path / "nsswitch.conf").write_text(nsswitch)
    assert localhost_stays_local(str(tmp_path / "hosts"), str(tmp_path / "nsswitch.conf")) is local


def test_unreadable_files_mean_no_lookup(tmp_path: Path) -> None:
    assert not localhost_stays_local(str(tmp_path / "none"), str(tmp_path / "none"))

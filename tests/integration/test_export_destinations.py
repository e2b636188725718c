"""Exports to odd files: a device, a FIFO and a symlink are written through or to their
target, never replaced by a regular file; a block device or a socket is refused before
the run (issue 24, item 7).

Observed before the fix, as root: ``--prom-textfile NODE`` for a character device made
with mknod left a regular file 0644 where the node was (``os.replace`` of the temp file
over it), and a symlink given to --junit became a regular file, its target untouched.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.refserver import RefServer

PROMPTPATH, OUT = [sys.executable, "-m", "promptpath"], "/dev/stdout"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


def run(server: RefServer, *args: str) -> CliResult:
    return run_cli(
        "run", server.path("/v1/chat/completions"), "-H", "x-promptpath-tokens: 3", "--json", *args
    )


def _char_device(path: Path) -> Path:
    """A node for /dev/null's device (1, 3): writing into it is harmless."""
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return path


def _read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with path.open("rb") as fifo:  # blocks until the writer opens it
            into.append(fifo.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@needs_root
def test_a_device_a_fifo_and_a_symlink_are_written_through_not_replaced(
    refserver_plain: RefServer, tmp_path: Path
) -> None:
    node = _char_device(tmp_path / "null")
    fifo = tmp_path / "har.fifo"
    os.mkfifo(fifo)
    target = tmp_path / "reports" / "junit.xml"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "junit-link.xml"
    link.symlink_to(target)
    got: list[bytes] = []
    reader = _read_fifo(fifo, got)
    # The reader must be waiting before the export opens the FIFO without blocking.
    time.sleep(0.2)
    res = run(
        refserver_plain,
        "--prom-textfile",
        str(node),
        "--har",
        str(fifo),
        "--junit",
        str(link),
    )
    reader.join(10)
    assert res.exit_code == ExitCode.OK, res.stderr
    assert stat.S_ISCHR(os.lstat(node).st_mode), "the device node was replaced"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert json.loads(got[0])["log"]["entries"], "the HAR went through the FIFO"
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("<?xml"), "the symlink's target holds the export"
    assert not [p for p in target.parent.iterdir() if p.name != "junit.xml"], "temp files left"


def test_a_dangling_symlink_is_written_at_its_target(
    refserver_plain: RefServer, tmp_path: Path
) -> None:
    target = tmp_path / "metrics.prom"
    link = tmp_path / "link.prom"
    link.symlink_to(target)
    res = run(refserver_plain, "--prom-textfile", str(link))
    assert res.exit_code == ExitCode.OK, res.stderr
    assert link.is_symlink() and "promptpath_" in target.read_text()


def test_a_fifo_nobody_reads_fails_the_export_at_once_not_hanging(
    refserver_plain: RefServer, tmp_path: Path
) -> None:
    fifo = tmp_path / "nobody.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    res = run(refserver_plain, "--har", str(fifo))
    assert res.exit_code == ExitCode.EXPORT, res.stderr
    assert f"export failed: --har {fifo}: a FIFO with no reader" in res.stderr
    assert json.loads(res.stdout)["ok"] is True  # the run's own report is whole
    # Measured ~1 s for the whole run on a loaded 2-core machine; a hang would be the
    # default 60 s timeout or forever.
    assert time.monotonic() - started < 20
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@needs_root
def test_a_block_device_or_a_socket_is_refused_before_the_run(
    refserver_plain: RefServer, tmp_path: Path
) -> None:
    block = tmp_path / "disk"
    os.mknod(block, stat.S_IFBLK | 0o600, os.makedev(7, 0))  # never opened
    res = run(refserver_plain, "--junit", str(block))
    assert res.exit_code == ExitCode.USAGE, res.stderr
    assert "is a block device" in res.stderr
    assert stat.S_ISBLK(os.lstat(block).st_mode)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        res = run(refserver_plain, "--har", str(tmp_path / "sock"))
    assert res.exit_code == ExitCode.USAGE and "is a socket" in res.stderr


def test_an_export_to_dev_stdout_redirected_to_a_file_appends_after_the_report(
    refserver_plain: RefServer, tmp_path: Path
) -> None:
    # A rename through /proc/self/fd/1 put the HAR where the file was and left the JSON
    # report in the unlinked inode our stdout still pointed at.
    out = tmp_path / "out.txt"
    with out.open("w") as stdout:
        inode = os.fstat(stdout.fileno()).st_ino
        url = refserver_plain.path("/v1/chat/completions")
        proc = subprocess.run(
            [*PROMPTPATH, "run", url, "-H", "x-promptpath-tokens: 3", "--json", "--har", OUT],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert os.stat(out).st_ino == inode, "the file was replaced"
    report, end = json.JSONDecoder().raw_decode(out.read_text())
    assert report["ok"] is True
    har = json.loads(out.read_text()[end:])
    assert har["log"]["entries"]


def test_two_exports_to_one_file_through_a_symlink_are_refused(tmp_path: Path) -> None:
    (tmp_path / "link.xml").symlink_to(tmp_path / "report.xml")
    res = run_cli(
        "run",
        "http://127.0.0.1:9/v1/chat/completions",  # refused before any request
        "--junit",
        str(tmp_path / "report.xml"),
        "--har",
        str(tmp_path / "link.xml"),
    )
    assert res.exit_code == ExitCode.USAGE
    assert "--junit and --har name the same file" in res.stderr

"""A reader that goes away (``--json | head -c 1``, a closed log pipe): exit 141, quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.refserver import reference_server

#: Long enough that the reader is gone before the report is written.
TTFT_MS = 1500


@pytest.mark.parametrize("closed", ["stdout", "stderr"])
def test_a_closed_output_pipe_ends_with_141_and_no_traceback(tmp_path: Path, closed: str) -> None:
    with reference_server(tls=False, tmp_path=tmp_path) as srv:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "promptpath",
                "run",
                f"http://127.0.0.1:{srv.port}/v1/messages",
                "-H",
                f"x-promptpath-ttft-ms: {TTFT_MS}",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        gone, kept = (
            (proc.stdout, proc.stderr) if closed == "stdout" else (proc.stderr, proc.stdout)
        )
        assert gone is not None and kept is not None
        gone.close()  # the child's next write to it fails with EPIPE
        try:
            other = kept.read().decode()
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 141, other
    # Python's own "Exception ignored ... BrokenPipeError" at exit would land on stderr.
    for noise in ("Traceback", "Exception ignored", "BrokenPipe"):
        assert noise not in other

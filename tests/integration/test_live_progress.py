"""The live progress line: on a terminal's stderr only, gone before the report."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

#: rich's transient Live ends by moving up one line and erasing it.
ERASED = "\r\x1b[1A\x1b[2K"
#: One frame of the line: a spinner, a stage, the seconds.
FRAME = re.compile(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] [a-z_]+[^\r\n]* · \d+\.\d s")


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def run(ref: RefServer, *, stderr_isatty: bool) -> tuple[int, str, str]:
    res = run_cli(
        "run",
        f"https://localhost:{ref.port}/v1/chat/completions",
        "--cacert",
        str(ref.ca),
        "-H",
        "x-promptpath-ttft-ms: 1500",
        stderr_isatty=stderr_isatty,
        environ={"NO_COLOR": "1"},  # the report's own styling out of the comparison
    )
    return res.exit_code, res.stdout, res.stderr


def test_a_terminal_sees_the_stage_move_then_an_intact_report(ref: RefServer) -> None:
    code, out, err = run(ref, stderr_isatty=True)
    assert code == 0 and out == ""
    # 1.5 s waiting for the first token at a 150 ms tick: several frames say so.
    frames = FRAME.findall(err)
    assert sum("first_token" in f for f in frames) >= 3, frames
    # Everything after the erase is the report alone, as a pipe would get it.
    live, report = err.split(ERASED)
    assert FRAME.search(live) and not FRAME.search(report)
    assert report.startswith("promptpath → https://localhost:")
    assert "OK: first token after" in report
    # On a terminal the report wraps at its width, so compare what each line starts with.
    # The CLIENT line is each run's own measure of this machine (it shows when promptpath
    # waited for a CPU between reads): one run of the two may have it and the other not (a
    # fresh-clone CI run, beside other tests: the piped run had it, the terminal's not).
    _, _, piped = run(ref, stderr_isatty=False)

    def starts(text: str) -> set[str]:
        return {line.split()[0] for line in text.splitlines() if line.strip()} - {"CLIENT"}

    assert starts(piped) <= starts(report)


def test_no_terminal_no_progress(ref: RefServer) -> None:
    code, out, err = run(ref, stderr_isatty=False)
    assert code == 0 and out == ""
    assert not FRAME.search(err) and "\x1b" not in err and "\r" not in err
    assert err.startswith("promptpath → https://localhost:")

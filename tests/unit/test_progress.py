"""What the live progress line says, from the timeline alone."""

from __future__ import annotations

import io

import anyio
from rich.console import Console

from promptpath.core.timeline import StreamEvent, Timeline
from promptpath.environment import Environment
from promptpath.modes.progress import LiveProgress, progress_console, stage_label

MS = 1_000_000


def timeline() -> Timeline:
    return Timeline(t0_ns=1_000 * MS, t0_unix_ns=0)


def test_an_open_stage_is_named() -> None:
    tl = timeline()
    tl.begin("tls", tl.t0_ns + 3 * MS)
    assert stage_label(tl) == "tls"


def test_between_stages_the_awaited_step_is_named() -> None:
    tl = timeline()
    assert stage_label(tl) == "starting"
    tl.mark("request_sent", tl.t0_ns + 5 * MS)
    assert stage_label(tl) == "ttfb"
    tl.mark("ttfb", tl.t0_ns + 6 * MS)
    assert stage_label(tl) == "first_token"
    tl.mark("ttft", tl.t0_ns + 3000 * MS)
    tl.events.append(StreamEvent(t_ns=tl.t0_ns + 3000 * MS, kind="content", text="x"))
    assert stage_label(tl) == "stream · 1 events"


def test_elapsed_from_t0_and_a_probe_note_from_its_own_start() -> None:
    tl = timeline()
    tl.mark("ttfb", tl.t0_ns + 6 * MS)
    lines: list[str] = []
    live = LiveProgress(io_console(), fallback=lines.append)
    live.watch(tl)
    assert live.line(tl.t0_ns + 3_240 * MS) == "first_token · 3.2 s"
    live.note("idle-timeout: holding the connection for 30 s")
    assert live.line(live._note_ns + 1_500 * MS).endswith("for 30 s · 1.5 s")
    assert lines == []  # on a terminal a note is shown in the line, not printed


def test_a_series_step_leads_the_line_of_each_run() -> None:
    lines: list[str] = []
    live = LiveProgress(io_console(), fallback=lines.append)
    live.step("run 3 of 20")
    tl = timeline()
    tl.begin("connect", tl.t0_ns + 1 * MS)
    live.watch(tl)
    assert live.line(tl.t0_ns + 2_000 * MS) == "run 3 of 20 · connect · 2.0 s"
    assert lines == []  # the live line only: the report lists the runs


def test_without_a_terminal_notes_fall_back_and_nothing_is_drawn() -> None:
    err = io.StringIO()
    env = Environment(stdout=io.StringIO(), stderr=err, stderr_isatty=False)
    lines: list[str] = []
    live = LiveProgress(progress_console(env), fallback=lines.append)

    async def go() -> None:
        async with live.running():
            live.note("buffering: a second request")
            await anyio.sleep(0.2)

    anyio.run(go)
    assert lines == ["buffering: a second request"] and err.getvalue() == ""


def test_the_line_is_erased_when_the_run_ends() -> None:
    err = io.StringIO()
    env = Environment(stdout=io.StringIO(), stderr=err, stderr_isatty=True)
    live = LiveProgress(progress_console(env), fallback=print)

    async def go() -> None:
        async with live.running():
            await anyio.sleep(0.05)

    anyio.run(go)
    text = err.getvalue()
    assert "starting · " in text and text.endswith("\r\x1b[1A\x1b[2K")


def io_console() -> Console | None:
    env = Environment(stdout=io.StringIO(), stderr=io.StringIO(), stderr_isatty=True)
    return progress_console(env)


def test_a_dumb_terminal_gets_no_live_line() -> None:
    # TERM=dumb cannot move its cursor: the erase codes would print as garbage.
    env = Environment(
        stdout=io.StringIO(), stderr=io.StringIO(), stderr_isatty=True, environ={"TERM": "dumb"}
    )
    assert progress_console(env) is None
    assert (
        progress_console(
            Environment(stdout=io.StringIO(), stderr=io.StringIO(), stderr_isatty=True)
        )
        is not None
    )


def test_a_probe_note_is_redacted_and_its_control_characters_spelled_out() -> None:
    from promptpath.core.redaction import Redactor

    key = "sk-live-0123456789abcdefXYZ"
    redactor = Redactor.of([key])
    lines: list[str] = []
    live = LiveProgress(None, fallback=lines.append, redactor=redactor)
    live.note(f"hop said \x1b]0;pwned\x07 {key[:14]}")
    assert lines == ["hop said \\x1b]0;pwned\\x07 [redacted]"]
    on_terminal = LiveProgress(io_console(), fallback=lines.append, redactor=redactor)
    on_terminal.note(f"server: \x1b[2J{key}")
    assert on_terminal.line(on_terminal._note_ns).startswith("server: \\x1b[2J[redacted] · ")

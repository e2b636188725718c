"""Terminal report details a person notices: NO_COLOR, empty stages, trailing spaces."""

from __future__ import annotations

import io

import pytest

from promptpath.cli.commands import RunArgs, build_options, report_console
from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import Timeline
from promptpath.environment import Environment
from promptpath.report import terminal
from promptpath.tracer.orchestrator import TraceResult

MS = 1_000_000


def traced(*, dns_ns: int, warm: bool = False) -> TraceResult:
    """A finished request whose DNS stage took ``dns_ns``, with one finding."""
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    stages = [("dns", 0, dns_ns), ("connect", dns_ns, 2 * MS), ("tls", 2 * MS, 5 * MS)]
    stages += [("request", 5 * MS, 6 * MS), ("wait", 6 * MS, 40 * MS)]
    for name, start, end in stages:
        tl.begin(name, start)
        tl.end(name, end)
    tl.address, tl.family, tl.http_version, tl.status = ("127.0.0.1", 443), "ipv4", "HTTP/2", 200
    tl.closed_ns = 60 * MS
    options = build_options(RunArgs(target="https://localhost:1/v1/chat/completions"), environ={})
    finding = Finding(probe="dns-cache", verdict=Verdict.SKIP, summary="not resolved by DNS")
    result = TraceResult(options=options, timeline=tl, findings=[finding])
    if warm:
        result.warm = TraceResult(options=options, timeline=tl)
    return result


def rendered(result: TraceResult, *, tty: bool, environ: dict[str, str]) -> str:
    out = io.StringIO()
    env = Environment(
        stdout=out, stderr=out, stdout_isatty=tty, environ={"COLUMNS": "100", **environ}
    )
    terminal.render(report_console(json_out=False, env=env), result)
    return out.getvalue()


def row(text: str, label: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(label + " ")]
    return line


def test_no_color_on_a_terminal_emits_no_escape_code_at_all() -> None:
    text = rendered(traced(dns_ns=MS), tty=True, environ={"NO_COLOR": "1", "TERM": "xterm"})
    assert "\x1b" not in text
    # The same report without NO_COLOR does style it (bold on "promptpath " and the probe
    # name): so the check above is about NO_COLOR, not a console that never styles.
    assert "\x1b[1m" in rendered(traced(dns_ns=MS), tty=True, environ={"TERM": "xterm"})


def test_a_stage_shown_as_zero_ms_draws_no_bar() -> None:
    text = rendered(traced(dns_ns=40_000), tty=False, environ={})
    assert row(text, "DNS").split() == ["DNS", "0.0"]
    assert "█" in row(text, "TCP connect")


def test_a_stage_of_a_tenth_of_a_millisecond_still_draws_one_block() -> None:
    text = rendered(traced(dns_ns=100_000), tty=False, environ={})
    assert row(text, "DNS").split() == ["DNS", "0.1", "█"]


@pytest.mark.parametrize("columns", ["100", "150"])  # stacked, and side by side when warm
def test_piped_report_has_no_trailing_spaces(columns: str) -> None:
    text = rendered(traced(dns_ns=MS, warm=True), tty=False, environ={"COLUMNS": columns})
    assert "█" in text
    assert [line for line in text.splitlines() if line != line.rstrip()] == []


def test_a_failed_http3_run_names_http3_in_its_header() -> None:
    options = build_options(
        RunArgs(target="https://localhost:1/v1/chat/completions", http="3"), environ={}
    )
    tl = Timeline(t0_ns=0, t0_unix_ns=0)  # failed before anything was negotiated
    text = rendered(TraceResult(options=options, timeline=tl), tty=False, environ={})
    header = text.splitlines()[0]
    assert "HTTP/3" in header and "?" not in header


def test_verbose_shows_the_client_hello_build_time_apart_from_the_handshake() -> None:
    result = traced(dns_ns=MS)
    result.timeline.client_hello_ns = 2_345_000
    quiet = rendered(result, tty=False, environ={})
    assert "ClientHello" not in quiet
    result.options = build_options(
        RunArgs(target="https://localhost:1/v1/chat/completions", verbose=True), environ={}
    )
    text = rendered(result, tty=False, environ={})
    assert "client CPU: 2.35 ms building the ClientHello" in text


def test_a_client_that_waited_long_for_a_cpu_says_so_and_a_quiet_one_says_nothing() -> None:
    from promptpath.core.timeline import Timeline
    from promptpath.report.terminal import cpu_wait_note

    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    assert cpu_wait_note(tl) is None  # the system did not say
    tl.cpu_wait_ns = 2_000_000  # 2 ms over a stream: a quiet machine
    assert cpu_wait_note(tl) is None
    tl.cpu_wait_ns = 63_200_000
    note = cpu_wait_note(tl)
    assert note is not None and "63.2 ms for a CPU" in note and "not counted as coalesced" in note


@pytest.mark.parametrize(
    ("verdict", "fail_on", "starts", "colour"),
    [
        (Verdict.FAIL, "fail", "FAIL buffering: a hop delivers", "\x1b[31m"),
        (Verdict.WARN, "warn", "WARN buffering: a hop delivers", "\x1b[33m"),
        (Verdict.WARN, "fail", "OK: no content token arrived", "\x1b[32m"),
    ],
)
def test_the_verdict_line_is_last_leads_with_the_finding_and_takes_its_colour(
    verdict: Verdict, fail_on: str, starts: str, colour: str
) -> None:
    result = traced(dns_ns=MS)
    result.findings = [
        Finding(
            probe="buffering",
            verdict=verdict,
            summary="a size-triggered buffer: 3 deliveries of exactly 4012 bytes",
            lead="a hop delivers the stream in 3.9 KiB blocks (Via: 1.1 nginx)",
        )
    ]
    out = io.StringIO()
    environ = {"TERM": "xterm", "COLUMNS": "300"}  # one line: no wrap to split it
    env = Environment(stdout=out, stderr=out, stdout_isatty=True, environ=environ)
    terminal.render(report_console(json_out=False, env=env), result, fail_on=fail_on)
    last = out.getvalue().rstrip("\n").splitlines()[-1]
    assert last.startswith(colour + starts), repr(last)

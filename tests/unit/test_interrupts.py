"""The stop-signal handlers: installed for the run only, nohup respected, second signal fatal."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from promptpath.modes.interrupts import STOP_SIGNALS, stop_on_signals


def test_the_previous_handlers_come_back_and_an_ignored_signal_stays_ignored() -> None:
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    inherited = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with stop_on_signals():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]
            assert signal.getsignal(signal.SIGINT) != before[signal.SIGINT]
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == before[signal.SIGTERM]
        assert signal.getsignal(signal.SIGINT) == before[signal.SIGINT]
    finally:
        signal.signal(signal.SIGHUP, inherited)


def test_the_first_signal_is_recorded_and_the_second_ends_the_process_by_it() -> None:
    script = textwrap.dedent(
        """
        import os, signal
        from promptpath.modes.interrupts import stop_on_signals

        with stop_on_signals() as stopper:
            os.kill(os.getpid(), signal.SIGTERM)
            print("first", stopper.signum, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            print("still here", flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == -signal.SIGTERM, proc
    assert proc.stdout == f"first {int(signal.SIGTERM)}\n" and proc.stderr == ""

"""--pcap around a mode: the capture started before t0, the secrets kept in memory, the
run's own packets written as pcapng with its TLS and QUIC secrets inside.

Secrets: while the capture runs, ``SSLKEYLOGFILE`` and the run's ``keylog_file`` name a
memory-only file (memfd): every SSLContext the run makes (the ssl module reads the
variable when a default context is built) and aioquic (net/keylog.py) write their key
log lines there, and nowhere on disk. After the run the lines go into the file's
Decryption Secrets Block, and, when the user's own ``SSLKEYLOGFILE`` was set, are
appended to it as well (as the run would have written them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from promptpath.core import pcapng
from promptpath.core.errors import UsageError
from promptpath.core.packets import FlowSet, own_packets
from promptpath.net import flows
from promptpath.net.capture import MAX_BYTES, Capture, Captured, CaptureError, open_capture
from promptpath.outputs.pcap import DIR_NAME, DIR_OTHER, PcapPlan, write_capture

if TYPE_CHECKING:
    from promptpath.environment import Environment
    from promptpath.options import RunOptions
    from promptpath.plan.plan import Plan

#: The most key log bytes read back (a run's handshakes write a few hundred bytes each).
MAX_KEYLOG_BYTES = 4 << 20

SECRETS_WARNING = (
    "promptpath: warning: {path} holds this run's TLS session secrets: whoever reads it"
    " reads the whole exchange, the API key included; keep it as you keep the key"
)


class _MemoryKeyLog:
    """A key log file that lives in memory only (Linux memfd), named by a /proc path."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("promptpath-keylog", os.MFD_CLOEXEC)
        self.path = f"/proc/self/fd/{self.fd}"

    def read(self) -> bytes:
        return os.pread(self.fd, MAX_KEYLOG_BYTES, 0)

    def close(self) -> None:
        os.close(self.fd)


def _flowset(log: flows.FlowLog, tag: int | None, every: bool) -> FlowSet:
    """The flows (and DNS names) of one run, or of the whole command with ``every``."""
    out = FlowSet()
    out.dns_ports |= log.dns_ports
    for flow in log.flows:
        if every or flow.tag == tag:
            if flow.local is None:
                out.remote_only.add((flow.proto, flow.remote))
            else:
                out.exact.add((flow.proto, flow.local, flow.remote))
    out.names = {name for name, t in log.names if every or t == tag}
    return out


def _packets(captured: Captured) -> list[pcapng.Packet]:
    if captured.way == "dumpcap":
        return list(pcapng.read(captured.stream))
    return [
        pcapng.Packet(ts_ns=ts, linktype=pcapng.LINKTYPE_RAW, data=data)
        for ts, data in captured.frames
    ]


def _wrote(path: Path, packets: int, keylog: bytes) -> str:
    """The line saying what a capture file holds: packets, and whose secrets."""
    from promptpath.core.textsafe import visible

    randoms = {line.split()[1] for line in keylog.splitlines() if len(line.split()) == 3}
    secrets = f"secrets of {len(randoms)} TLS/QUIC session{'s' * (len(randoms) != 1)} inside"
    return f"promptpath: capture: {packets} packets to {visible(str(path))} ({secrets})"


class PcapSession:
    """One --pcap capture: ``start()`` before the mode runs, ``finish()`` after it."""

    def __init__(self, plan: PcapPlan, env: Environment) -> None:
        self.plan, self.env = plan, env
        self._keylog = _MemoryKeyLog()
        self._capture: Capture = open_capture(plan.way, plan.interface, env.environ)  # type: ignore[arg-type]
        self._log: flows.FlowLog | None = None
        self._listening: contextlib.ExitStack = contextlib.ExitStack()
        self._saved_env: str | None = None
        self.stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        #: The user's own SSLKEYLOGFILE (the plan's): it gets the same lines after the run.
        self.user_keylog: str | None = None

    @property
    def keylog_path(self) -> str:
        return self._keylog.path

    def start(self) -> None:
        """Capture from now (it runs when this returns); the secrets go to memory."""
        try:
            self._capture.start()
        except CaptureError as exc:
            self._keylog.close()
            raise UsageError(f"--pcap: {exc} (via {self.plan.way})", kind="bad_option") from exc
        self._log = self._listening.enter_context(flows.listening())
        self._saved_env = os.environ.get("SSLKEYLOGFILE")
        os.environ["SSLKEYLOGFILE"] = self._keylog.path

    def _restore_env(self) -> None:
        if self._saved_env is None:
            os.environ.pop("SSLKEYLOGFILE", None)
        else:
            os.environ["SSLKEYLOGFILE"] = self._saved_env

    def finish(self, options: RunOptions) -> list[str]:
        """Stop after the last byte, write the file(s); the failures, one line each."""
        from promptpath.tracer.request import key_sent

        self._restore_env()
        self._listening.close()
        failures: list[str] = []
        try:
            captured = self._capture.stop()
        except CaptureError as exc:
            failures.append(f"--pcap: {exc}")
            captured = None
        keylog = self._keylog.read()
        self._keylog.close()
        user_keylog = self.user_keylog
        if user_keylog and keylog:
            try:  # without blocking: a FIFO whose reader left must not hold the exit
                fd = os.open(user_keylog, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK)
                try:
                    os.write(fd, keylog)
                finally:
                    os.close(fd)
            except OSError as exc:
                failures.append(f"SSLKEYLOGFILE: {exc.strerror or exc}")
        if captured is None or self._log is None:
            return failures
        if captured.dropped:
            failures.append(
                f"--pcap: the capture passed its {MAX_BYTES >> 20} MiB bound: later packets were"
                " not kept"
            )
        packets = _packets(captured)
        try:
            for path, flowset in self._files(self._log):
                kept = own_packets(packets, flowset)
                data = pcapng.write(
                    kept,
                    keylog=keylog,
                    interface_name=f"{captured.interface} ({captured.way})",
                )
                write_capture(path, data)
                print(_wrote(path, len(kept), keylog), file=self.env.stderr)
        except OSError as exc:
            failures.append(f"--pcap {self.plan.path}: {exc.strerror or exc}")
        else:
            if keylog and key_sent(options):
                print(SECRETS_WARNING.format(path=self.plan.path), file=self.env.stderr)
        return failures

    def _files(self, log: flows.FlowLog) -> Iterator[tuple[Path, FlowSet]]:
        if not self.plan.directory:
            yield self.plan.path, _flowset(log, None, every=True)
            return
        used = {f.tag for f in log.flows} | {t for _, t in log.names}
        runs = [tag for tag in log.tags if tag in used]
        for n, tag in enumerate(runs, 1):
            yield (
                self.plan.path / DIR_NAME.format(stamp=self.stamp, n=n),
                _flowset(log, tag, every=False),
            )
        if None in used:
            yield (
                self.plan.path / DIR_OTHER.format(stamp=self.stamp),
                _flowset(log, None, every=False),
            )


def start_pcap(plan: Plan, env: Environment) -> tuple[Plan, PcapSession | None]:
    """The capture started (when --pcap asks for one) and the plan whose runs write their
    secrets to it; UsageError (exit 2, nothing sent yet) when it cannot start."""
    if plan.outputs.pcap is None:
        return plan, None
    try:
        session = PcapSession(plan.outputs.pcap, env)
    except CaptureError as exc:
        raise UsageError(f"--pcap: {exc}", kind="bad_option") from exc
    session.user_keylog = plan.trace.keylog_file
    session.start()
    trace = dataclasses.replace(plan.trace, keylog_file=session.keylog_path)
    return dataclasses.replace(plan, trace=trace), session


__all__ = ["SECRETS_WARNING", "PcapSession", "start_pcap"]

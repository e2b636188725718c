"""--pcap's destination: the plan (checked before the first packet) and the file's write.

A capture file holds the run's TLS and QUIC session secrets, so it is written as a
private file (0600, as mkstemp makes it), atomically beside its name at a symlink's
target; a character device or a FIFO is written through, never replaced (as every
export: outputs/deliver.py).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from promptpath.core.files import special_kind
from promptpath.outputs.deliver import _names_a_descriptor, write_through

#: Files of --pcap DIR: one per run, named for the command's start and the run's number.
DIR_NAME = "promptpath-{stamp}-run{n:03d}.pcapng"
#: Flows no run opened (a probe's own connection) go to a file of their own in a DIR.
DIR_OTHER = "promptpath-{stamp}-other.pcapng"


@dataclass(frozen=True, slots=True, kw_only=True)
class PcapPlan:
    """Where the capture goes, and how it is taken (checked when the plan was made)."""

    path: Path
    #: A directory: one file per run inside it.
    directory: bool
    way: str  # "dumpcap" or "packet socket" (net/capture.py's Way)
    interface: str  # "lo" when every address the run may use is loopback, else "any"


def write_capture(path: Path, data: bytes) -> None:
    """Write the pcapng bytes at ``path`` (never replacing a device, a FIFO or a link)."""
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    special = None if mode is None else special_kind(mode)
    if special is None and _names_a_descriptor(path):
        write_through(path, data, append=True)
    elif special is None:
        _write_private(Path(os.path.realpath(path)), data)
    elif special in ("character device", "FIFO"):
        write_through(path, data)
    else:
        raise OSError(f"{path} is a {special}, not written")


def _write_private(path: Path, data: bytes) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)  # mkstemp made it 0600: it holds session secrets
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


__all__ = ["DIR_NAME", "DIR_OTHER", "PcapPlan", "write_capture"]

"""The exports: every file format of outputs/formats.py, --pushgateway, --label.

The formats' writers (outputs/writers.py, on the renderers in report/) turn the JSON report
into text; this module checks the destinations before anything is sent, writes files
atomically and pushes to a Prometheus Pushgateway. It takes the JSON report (a single run
or a series), never a TraceResult.

Failures after the run are not the run's: each is reported on its own line and gives
exit 10 (EXPORT) only when the run itself exited 0, so a failed export never hides a
failed run's own code.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import os
import re
import select
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from promptpath.core.errors import UsageError
from promptpath.core.exitcodes import ExitCode
from promptpath.core.files import special_kind
from promptpath.environment import Environment
from promptpath.outputs.formats import BY_DEST, going

#: A push is one small upload: a Pushgateway that takes longer than this is as good as down.
PUSH_TIMEOUT_S = 10.0
#: The longest an export waits to write into a FIFO (or a terminal) that does not drain.
WRITE_TIMEOUT_S = 10.0
PUSH_JOB = "promptpath"

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class ExportFailed(Exception):
    """An export that could not be written or pushed (the run itself is unaffected)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportPlan:
    """Where the report goes besides stdout; checked before the first packet."""

    #: Each file format asked for (its ``Format.dest``) and its path, in the table's order.
    files: tuple[tuple[str, Path], ...] = ()
    pushgateway: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    fail_on: str = "fail"
    #: The command line that reproduces the run, credentials redacted (the HTML shows it).
    command: tuple[str, ...] = ()

    def path(self, dest: str) -> Path | None:
        """Where the format ``dest`` is written, or None when it was not asked for."""
        return dict(self.files).get(dest)

    @property
    def wanted(self) -> bool:
        """The machine-read exports (JUnit, HAR, Prometheus): one run or a series only.
        The reports a person reads (--html, --svg) go with every mode, --compare-http too."""
        machine = any(BY_DEST[dest].machine for dest, _ in self.files)
        return machine or self.pushgateway is not None

    @property
    def any(self) -> bool:
        return bool(self.files) or self.pushgateway is not None

    def finish(self, report: Mapping[str, Any], code: int, env: Environment) -> int:
        """Write every export of ``report`` (the run's exit ``code``) and return the exit
        code: the run's own when it failed, else 10 when an export failed."""
        # What was printed goes out first: an export to /dev/stdout appends after it.
        for stream in (env.stdout, env.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        failures = write_exports(report, self)
        from promptpath.core.textsafe import visible

        for message in failures:
            # A Pushgateway's answer is quoted: its control characters spelled out.
            print(f"promptpath: export failed: {visible(message)}", file=env.stderr)
        if code == ExitCode.OK and failures:
            return int(ExitCode.EXPORT)
        return code


def parse_labels(specs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """--label k=v values, checked against Prometheus' label-name rules."""
    labels: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        name = name.strip()
        if not sep:
            raise UsageError(f"--label wants NAME=VALUE, got {spec!r}", kind="bad_option")
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise UsageError(
                f"--label {spec!r}: {name!r} is not a Prometheus label name"
                " ([a-zA-Z_][a-zA-Z0-9_]*, no leading __)",
                kind="bad_option",
            )
        from promptpath.report.prometheus import RESERVED_LABELS

        if name in RESERVED_LABELS:
            raise UsageError(
                f"--label {name}: promptpath sets that label itself"
                f" (reserved: {', '.join(sorted(RESERVED_LABELS))})",
                kind="bad_option",
            )
        if name in labels:
            raise UsageError(f"--label {name} given twice", kind="bad_option")
        labels[name] = value
    return tuple(labels.items())


#: Special files an export writes through (open and write, never rename over them):
#: /dev/null, /dev/stdout (a symlink to the terminal or a pipe), a named pipe.
WRITABLE_SPECIALS = ("character device", "FIFO")


def check_writable(path: Path, flag: str) -> None:
    """Fail now, before any request, if ``path`` cannot be written; the run costs money.

    A symlink is followed: the export goes to its target, and the link stays. A character
    device or a FIFO is written through; a block device or a socket is refused."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory", kind="bad_option")
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write there ({exc.strerror or exc})", kind="bad_option"
        ) from exc
    special = None if mode is None else special_kind(mode)
    if special is not None and special not in WRITABLE_SPECIALS:
        raise UsageError(
            f"{flag} {path}: is a {special}; an export goes to a regular file, a"
            " character device or a FIFO",
            kind="bad_option",
        )
    if special is not None or (mode is not None and _names_a_descriptor(path)):
        # Written through, never replaced (write_export): writable is all there is to know.
        if not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {path}: cannot write there (read-only)", kind="bad_option")
        return
    target = Path(os.path.realpath(path))  # a symlink's target is the file written
    directory = target.parent
    if not directory.is_dir():
        raise UsageError(f"{flag} {path}: no such directory {directory}", kind="bad_option")
    # Creating a file is the only test that holds for root, ACLs and read-only mounts alike.
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=f".{target.name}.", suffix=".check"):
            pass
        if target.exists() and not os.access(target, os.W_OK):
            raise PermissionError(f"{path} is read-only")
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write there ({exc.strerror or exc})", kind="bad_option"
        ) from exc


def _check_pushgateway(url: str) -> str:
    from promptpath.core.urlsafe import shown_url

    wants = f"--pushgateway wants http(s)://HOST:PORT, got {shown_url(url)!r}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - urlsplit checks brackets and the port lazily
    except ValueError as exc:
        # An unclosed "[" or a port that is no number: found before the run, not by the
        # push after it (an internal error, once the run's tokens were spent).
        raise UsageError(f"{wants} ({exc})", kind="bad_option") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(wants, kind="bad_option")
    if parts.query or parts.fragment:
        raise UsageError("--pushgateway takes no query or fragment", kind="bad_option")
    return url.rstrip("/")


def _file_key(path: Path) -> str:
    """What two export paths are compared by: a regular file's real path (two names for
    one file, through a symlink, would overwrite each other), a stream's own name (two
    exports to one terminal or pipe are written one after the other)."""
    if _names_a_descriptor(path):
        return str(path)
    with contextlib.suppress(OSError):
        if special_kind(os.stat(path).st_mode) is not None:
            return str(path)
    return os.path.realpath(path)


def plan_exports(
    given: Mapping[str, str | None],
    *,
    labels: Sequence[str] = (),
    fail_on: str = "fail",
) -> ExportPlan:
    """Check every destination ``given`` (a value by ``Format.dest``: each file format's
    path, the --pushgateway URL); each problem is a UsageError (exit 2), raised before the
    run."""
    paths: dict[str, Path | None] = {}
    files = tuple((fmt.flag, given.get(fmt.dest)) for fmt in going("file"))
    for flag, value in files:
        path = None if value is None else Path(value)
        if path is not None:
            check_writable(path, flag)
            key = _file_key(path)
            twin = next(
                (f for f, p in paths.items() if p is not None and _file_key(p) == key), None
            )
            if twin is not None:
                raise UsageError(f"{twin} and {flag} name the same file {path}", kind="bad_option")
        paths[flag] = path
    pushgateway = given.get("pushgateway")
    return ExportPlan(
        files=tuple(
            (fmt.dest, path) for fmt in going("file") if (path := paths[fmt.flag]) is not None
        ),
        pushgateway=None if pushgateway is None else _check_pushgateway(pushgateway),
        labels=parse_labels(labels),
        fail_on=fail_on,
    )


def write_export(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` without ever replacing what is not a regular file.

    A regular file (or none yet) is written atomically (``write_atomic``), at a symlink's
    target so that the link stays a link; a character device or a FIFO is opened and
    written through (``write_through``). As root, a rename over /dev/null or /dev/stdout
    replaced the device node with a regular file."""
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None  # none yet, or a dangling symlink: created at the target
    special = None if mode is None else special_kind(mode)
    if special is None and _names_a_descriptor(path):
        # /dev/stdout redirected to a file: a rename would put the export in the file's
        # place and leave the report on our stdout in an unlinked inode; append instead,
        # after what was written there already.
        write_through(path, text, append=True)
    elif special is None:
        write_atomic(Path(os.path.realpath(path)), text)
    elif special in WRITABLE_SPECIALS:
        write_through(path, text)
    else:
        raise OSError(errno.EINVAL, f"is a {special}, not written")


_DESCRIPTOR = re.compile(r"/dev/(?:stdout|stderr|fd/\d+)|/proc/(?:self|thread-self|\d+)/fd/\d+")


def _names_a_descriptor(path: Path) -> bool:
    """``path`` names an open file descriptor (/dev/stdout, /dev/fd/N, /proc/self/fd/N)."""
    return _DESCRIPTOR.fullmatch(os.path.normpath(os.path.abspath(path))) is not None


def write_through(
    path: Path, text: str | bytes, timeout: float = WRITE_TIMEOUT_S, *, append: bool = False
) -> None:
    """Open a character device or FIFO (or, with ``append``, a file behind a descriptor)
    and write ``text`` into it, within ``timeout``: a FIFO with no reader, or one that
    stops reading, must not hang the exit."""
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # O_NONBLOCK on a FIFO nobody has open for reading
            raise OSError(errno.ENXIO, "a FIFO with no reader") from exc
        raise
    data = memoryview(text.encode("utf-8") if isinstance(text, str) else text)
    deadline = time.monotonic() + timeout
    try:
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise OSError(errno.ETIMEDOUT, f"not writable within {timeout:g} s")
            try:
                data = data[os.write(fd, data) :]
            except BlockingIOError:
                continue
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temp file beside ``path`` and rename it over ``path``: a reader
    (node_exporter's textfile collector scraping mid-write) sees the old file or the new."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # mkstemp makes the file 0600; node_exporter usually runs as another user.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _segment(name: str, value: str) -> str:
    """One grouping label in a Pushgateway URL; values with a slash (or empty) go base64,
    the Pushgateway's own escape for what a path segment cannot carry."""
    if value == "" or "/" in value:
        encoded = base64.urlsafe_b64encode(value.encode()).decode() or "="
        return f"{name}@base64/{encoded}"
    return f"{name}/{quote(value, safe='')}"


def push_url(base: str, labels: Mapping[str, str], target: str) -> str:
    """/metrics/job/promptpath/instance/<instance>/target/<url>[/<label>/<value>...] under
    ``base``; the instance is --label instance=..., else this machine's host name. The
    target is part of the group so that one runner checking two endpoints keeps both."""
    grouping = {"instance": labels.get("instance") or socket.gethostname(), **labels}
    grouping["target"] = target
    path = "/".join(_segment(k, v) for k, v in grouping.items())
    return f"{base}/metrics/job/{PUSH_JOB}/{path}"


def push(base: str, text: str, labels: Mapping[str, str], target: str) -> None:
    """PUT the exposition to a Pushgateway: PUT replaces this group's metrics, so a
    series' quantiles do not outlive the push of a later single run. A failure names the
    Pushgateway without its userinfo, and what it answered without the credentials the
    push sent (a gateway or a proxy before it may echo them)."""
    import ssl

    import httpx

    from promptpath.core.redaction import Redactor
    from promptpath.core.urlsafe import shown_url, url_credentials

    url = push_url(base, labels, target)
    scrub = Redactor.of(url_credentials(base)).text
    shown = shown_url(base)
    try:
        # trust_env=False: the Pushgateway is reached directly, not via HTTP(S)_PROXY.
        response = httpx.put(
            url,
            content=text.encode(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
            timeout=PUSH_TIMEOUT_S,
            trust_env=False,
            # The system's CAs (an internal Pushgateway's CA is installed there), not certifi's.
            verify=ssl.create_default_context(),
        )
    except httpx.HTTPError as exc:
        raise ExportFailed(
            f"--pushgateway {shown}: {scrub(str(exc) or type(exc).__name__)}"
        ) from exc
    if not response.is_success:
        reason = " ".join(scrub(response.text).split())
        if len(reason) > 400:
            # The Pushgateway quotes the whole metric first and says what is wrong last.
            reason = f"{reason[:150]} … {reason[-200:]}"
        raise ExportFailed(f"--pushgateway {shown}: HTTP {response.status_code} {reason}".rstrip())


def write_exports(report: Mapping[str, Any], plan: ExportPlan) -> list[str]:
    """Every export the plan asks for; one failing does not stop the others."""
    from promptpath.report.runs import target_of

    failures: list[str] = []
    labels = dict(plan.labels)
    for dest, path in plan.files:
        fmt = BY_DEST[dest]
        try:
            write_export(path, fmt.render(report, plan))
        except OSError as exc:
            failures.append(f"{fmt.flag} {path}: {exc.strerror or exc}")
    if plan.pushgateway is not None:
        try:
            text = BY_DEST["pushgateway"].render(report, plan)
            push(plan.pushgateway, text, labels, target_of(report))
        except ExportFailed as exc:
            failures.append(str(exc))
    return failures

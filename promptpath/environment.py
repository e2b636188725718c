"""What the CLI takes from the process it runs in, as one value that can be replaced.

``main(argv, env=Environment(...))`` runs the whole command line with StringIO streams
and a plain dict for the environment, so tests check stdout, stderr and the exit code of
the real entry point in-process, and nothing swaps ``sys.stdout`` or ``os.environ``.
Only :meth:`Environment.from_process` reads the process; everything below ``main``
reads the Environment it is handed.

Kept free of heavy imports: ``promptpath --version`` builds one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TextIO


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except ValueError:  # a closed stream is no terminal
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Environment:
    """The streams, terminal facts, environment variables and arguments of one CLI run."""

    stdout: TextIO
    """Where results go: the JSON object, the listening line, the report on a terminal."""
    stderr: TextIO
    """Where messages go, and the terminal report when stdout is not a terminal."""
    stdout_isatty: bool = False
    """stdout is a terminal: the report goes there, in colour unless NO_COLOR says not."""
    stderr_isatty: bool = False
    """stderr is a terminal: colour on stderr, and long lines wrapped to its width."""
    environ: Mapping[str, str] = field(default_factory=dict)
    """API keys, PROMPTPATH_CONFIG / XDG_CONFIG_HOME, NO_COLOR, COLUMNS, PROMPTPATH_DEBUG."""
    argv: tuple[str, ...] = ()
    """The arguments after the program name."""

    @classmethod
    def from_process(cls) -> Environment:
        """The real process: its streams, its terminal, ``os.environ``, ``sys.argv``."""
        return cls(
            stdout=sys.stdout,
            stderr=sys.stderr,
            stdout_isatty=_isatty(sys.stdout),
            stderr_isatty=_isatty(sys.stderr),
            environ=os.environ,
            argv=tuple(sys.argv[1:]),
        )

    @classmethod
    def of(cls, obj: object) -> Environment:
        """The Environment ``main`` put on the click context (``ctx.obj``); the real
        process when the app runs without ``main`` (``python -m promptpath.server``)."""
        return obj if isinstance(obj, Environment) else cls.from_process()

    @property
    def no_color(self) -> bool:
        """https://no-color.org: NO_COLOR set to anything but the empty string."""
        return self.environ.get("NO_COLOR", "") != ""

    @property
    def force_color(self) -> bool:
        """https://force-color.org: colour even into a pipe (NO_COLOR still wins)."""
        return self.environ.get("FORCE_COLOR", "") != ""

    def colour(self, isatty: bool) -> bool:
        """Whether to colour a stream that is (or is not) a terminal."""
        return (isatty or self.force_color) and not self.no_color

    @property
    def debug(self) -> bool:
        """PROMPTPATH_DEBUG: let an internal error's traceback through."""
        return bool(self.environ.get("PROMPTPATH_DEBUG"))


__all__ = ["Environment"]

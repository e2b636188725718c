"""The console script: ``promptpath --version`` answers before Typer, click and the option
table are imported (they are most of a start-up); everything else goes to ``cli.main``.

Three costs of a short process that nothing in it asks for are left out here, and only here
(``cli.main`` run in-process by tests and library callers keeps Python's defaults):

- the cyclic collector during start-up (gchold.py): off from here until the command's
  options are parsed.
- recompiling the methods of every dataclass the start-up defines (dccache.py): their
  code objects are cached beside the package's bytecode.
- interpreter finalisation: module teardown and a last collection over the start-up's
  objects, ~50 ms of CPU a run (``benchmarks/bench_startup.py``). Once ``cli.main`` has
  returned, nothing is left to do but flush the two streams: every file promptpath writes
  (JSON, exports, key logs) is closed by a ``with`` block before it returns, no atexit hook
  is registered, and the event loop's threads were joined when ``anyio.run`` returned. So
  the process ends with ``os._exit`` after the flush. A return by exception
  (PROMPTPATH_DEBUG's traceback) takes Python's ordinary way out.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from promptpath.cli import gchold


def run(argv: list[str]) -> int:
    """The command line's exit code (the process goes on)."""
    if argv == ["--version"]:
        from promptpath import __version__

        print(f"promptpath {__version__}")
        return 0
    from promptpath.cli import dccache

    dccache.install()
    from promptpath.cli.faces import main as cli_main

    return cli_main()


def end(code: int) -> NoReturn:
    """Flush stdout and stderr, then end the process with ``code`` and no finalisation.

    A reader that went away before the last bytes were flushed makes it ExitCode.PIPE_CLOSED,
    as a closed pipe does anywhere else in a run."""
    cache = sys.modules.get("promptpath.cli.dccache")
    if cache is not None:
        cache.save()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            from promptpath.core.exitcodes import ExitCode

            code = int(ExitCode.PIPE_CLOSED)
        except (OSError, ValueError):  # a closed or broken stream: nothing more to say
            pass
    os._exit(code)


def main() -> NoReturn:
    """The console script (``promptpath``) and ``python -m promptpath``."""
    gchold.hold()
    end(run(sys.argv[1:]))


__all__ = ["end", "main", "run"]

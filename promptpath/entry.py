"""The console script: ``promptpath --version`` answers before Typer, click and the option
table are imported (they are most of a start-up); everything else goes to ``cli.main``."""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        from promptpath import __version__

        print(f"promptpath {__version__}")
        return 0
    from promptpath.cli import main as cli_main

    return cli_main()


__all__ = ["main"]

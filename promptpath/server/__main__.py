"""``python -m promptpath.server [options]``: the same as ``promptpath serve``."""

from __future__ import annotations

import typer

from promptpath.server.command import serve


def main() -> None:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(serve)
    app()


if __name__ == "__main__":
    main()

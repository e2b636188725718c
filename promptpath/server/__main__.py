"""``python -m promptpath.server [options]``: the same as ``promptpath serve``."""

from __future__ import annotations

import typer

from promptpath.plan.flags import signed
from promptpath.server.command import serve


def main() -> None:
    # The same settings as ``promptpath serve``: plain usage errors, no rich boxes.
    app = typer.Typer(
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    # declare() makes the signature when the command is built: signed() builds it here.
    app.command()(signed(serve))
    app()


if __name__ == "__main__":
    main()

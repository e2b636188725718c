"""The command that reproduces a run, ready to paste: what the HTML and Markdown reports show.

Pure. The command line comes in already redacted (cli/commands.py's ``reproduce``), but a
redacted ``-H 'Authorization: [redacted]'`` pasted back would send ``[redacted]``: such a
header is left out, and the notes say so, as for a credential left out anywhere else.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from promptpath.core.redaction import MARKER


@dataclass(frozen=True, slots=True, kw_only=True)
class Reproduction:
    """The shell line to paste, and what a reader must put back before running it."""

    line: str
    notes: tuple[str, ...]


def _header_value(arg: str) -> str | None:
    """The value of a header given as one argument (``--header=V``, ``-HV``), else None."""
    if arg.startswith("--header="):
        return arg.removeprefix("--header=")
    if arg.startswith("-H") and arg != "-H":
        return arg[2:]
    return None


def reproduction(command: Sequence[str]) -> Reproduction:
    """``command`` as one shell line without its redacted credential headers, and notes."""
    kept: list[str] = []
    left_out: list[str] = []
    args = iter(command)
    for arg in args:
        if arg in ("-H", "--header"):
            value = next(args, "")
            if MARKER in value:
                left_out.append(value.split(":", 1)[0].strip())
            else:
                kept += [arg, value]
            continue
        attached = _header_value(arg)
        if attached is not None and MARKER in attached:
            left_out.append(attached.split(":", 1)[0].strip())
            continue
        kept.append(arg)
    notes = []
    if left_out:
        names = ", ".join(dict.fromkeys(left_out))
        several = len(set(left_out)) > 1
        notes.append(
            f"The credential header{'s' if several else ''} {names}"
            f" {'were' if several else 'was'} left out of this command: add your own with -H,"
            " or set the API key's variable."
        )
    if any(MARKER in arg for arg in kept):
        notes.append(
            f"A credential was left out where the command says {MARKER}: put your own"
            " back before running it."
        )
    return Reproduction(line=shlex.join(kept), notes=tuple(notes))


__all__ = ["Reproduction", "reproduction"]

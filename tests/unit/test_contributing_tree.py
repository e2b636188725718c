"""CONTRIBUTING's tree of the package is held to the code: every room at the top of the tree
is named there, and every file the tree names exists where it says (a move that forgets the
map fails here, as one once left six modules and a whole storey out of it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "promptpath"
_ENTRY = re.compile(r"^( {2}| {4})([\w.]+(?:\.py|/))")


def _tree() -> list[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    block = text[text.index("```\npromptpath/\n") + 4 :]
    return block[: block.index("```")].splitlines()[1:]


def _named() -> tuple[set[str], dict[str, set[str]]]:
    """Top-level rooms, and per folder the files its indented lines start with."""
    top: set[str] = set()
    inside: dict[str, set[str]] = {}
    folder = ""
    for line in _tree():
        match = _ENTRY.match(line)
        if match is None:
            continue
        indent, name = match.groups()
        if len(indent) == 2:
            top.add(name)
            folder = name if name.endswith("/") else ""
        elif folder:
            inside.setdefault(folder, set()).add(name)
    return top, inside


def test_every_room_at_the_top_is_in_the_tree() -> None:
    top, _ = _named()
    rooms = {p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    modules = {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py", "__main__.py"}
    assert rooms | modules <= top, f"missing from the tree: {sorted((rooms | modules) - top)}"
    assert top <= rooms | modules, f"the tree names what is gone: {sorted(top - rooms - modules)}"


def test_every_file_the_tree_names_exists_where_it_says() -> None:
    _, inside = _named()
    gone = sorted(
        f"{folder}{name}"
        for folder, names in inside.items()
        for name in names
        if not (PACKAGE / folder / name).exists()
    )
    assert not gone, f"the tree names files that are not there: {gone}"

"""No function takes more than 12 parameters, outside the Typer faces.

A long parameter list is a table or a value object waiting to be named (serve took 29
before its options became tables, server/streaming.py's write_stream 13 before
StreamSpec). The faces are exempt by name: Typer reads a command's options from its
signature, and a face may declare them inline (those built from plan/flags.py's tables
take ``**values`` and pass anyway).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "promptpath"
MOST = 12

#: The Typer faces, "<file under promptpath/>:<function>": the functions Typer reads
#: options from.
FACES = frozenset(
    {
        "cli/faces.py:_root",
        "cli/faces.py:run",
        "cli/faces.py:probe",
        "cli/faces.py:demo",
        "cli/faces.py:exporter",
        "server/command.py:serve",
    }
)


def _count(args: ast.arguments) -> int:
    """Every parameter a caller may pass, ``*args`` and ``**kwargs`` included; a method's
    ``self`` or ``cls`` is not one."""
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if named and named[0].arg in ("self", "cls"):
        named = named[1:]
    return len(named) + (args.vararg is not None) + (args.kwarg is not None)


def _functions() -> Iterator[tuple[str, str, int]]:
    """(file under promptpath/, function name, parameter count) for every def and lambda."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield rel, node.name, _count(node.args)
            elif isinstance(node, ast.Lambda):
                yield rel, f"<lambda line {node.lineno}>", _count(node.args)


def test_no_function_outside_the_typer_faces_takes_more_than_twelve_parameters() -> None:
    long = sorted(
        f"{rel}:{name} takes {count}"
        for rel, name, count in _functions()
        if count > MOST and f"{rel}:{name}" not in FACES
    )
    assert not long, "more than 12 parameters (a table or a value object?):\n" + "\n".join(long)


def test_every_exempt_face_exists() -> None:
    """The exemptions name real functions: a face renamed or gone leaves no stale pass."""
    found = {f"{rel}:{name}" for rel, name, _ in _functions()}
    assert sorted(FACES - found) == []


def test_the_count_reads_what_a_caller_may_pass() -> None:
    tree = ast.parse("def f(a, /, b, *c, d, **e): pass\nclass K:\n    def m(self, a): pass\n")
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    assert [_count(d.args) for d in defs] == [5, 1]

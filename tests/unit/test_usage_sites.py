"""Option conflicts are checked in one module: promptpath/plan/resolve.py.

Scans the package's source for every ``UsageError(...)`` built and reads the options its
message names. A message naming two or more options of `run`/`probe` is a check of one
option against another: it must be raised in resolve.py, where the Plan is built, so that
nothing below the Plan re-checks options (the issue: checks spread over five places).

A value that is wrong on its own (a malformed --resolve entry, a --label that is not a
Prometheus name) may stay beside its parser: its message names one option. The few sites
outside resolve.py whose message names two options for another reason are listed in
ALLOWED, each with why.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import promptpath
from promptpath.plan import flags

PACKAGE = Path(promptpath.__file__).parent
RESOLVE = "promptpath/plan/resolve.py"

#: Every spelling of every option `run` and `probe` take.
OPTION_NAMES = frozenset(
    name for flag in flags.FLAGS for decl in flag.decls for name in decl.split("/")
)
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[46kHxmpv])(?![\w-])")

#: (file, function) -> why a message there names two options without being a conflict.
ALLOWED = {
    ("promptpath/options.py", "parse_target"): "credentials in the URL: the message names the"
    " two options to use instead",
    ("promptpath/options.py", "check_client_cert"): "a certificate and its key are one value,"
    " read from one or two files; the messages say what is wrong with the files",
    ("promptpath/tracer/orchestrator.py", "ssl_context_for"): "a library caller's --cert/--key"
    " that fail to load (resolve.py checked the command line's already)",
}


def _text(node: ast.expr) -> str:
    """The constant text of a message: f-string parts and concatenations included."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    return ""


def _sites() -> Iterator[tuple[str, str, int, set[str]]]:
    """(file, enclosing function, line, options named) for every UsageError built."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE.parent))
        tree = ast.parse(path.read_text(), rel)
        parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                parents[child] = parent
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "UsageError"):
                continue
            if not node.args:
                continue
            named = {m for m in _OPTION.findall(_text(node.args[0])) if m in OPTION_NAMES}
            scope: ast.AST | None = node
            while scope is not None and not isinstance(
                scope, (ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                scope = parents.get(scope)
            function = scope.name if scope is not None else "<module>"
            yield rel, function, node.lineno, named


SITES = list(_sites())


def test_every_conflict_between_options_is_raised_in_resolve() -> None:
    outside = [
        f"{file}:{line} ({function}) names {sorted(named)}"
        for file, function, line, named in SITES
        if len(named) >= 2 and file != RESOLVE and (file, function) not in ALLOWED
    ]
    assert not outside, "check these in promptpath/plan/resolve.py:\n" + "\n".join(outside)


def test_the_scan_sees_the_conflicts_resolve_checks() -> None:
    # A scan that found nothing would pass the test above for the wrong reason.
    in_resolve = [named for file, _f, _l, named in SITES if file == RESOLVE and len(named) >= 2]
    assert len(in_resolve) >= 10
    assert any(named == {"--connections", "--concurrency"} for named in in_resolve)
    assert any({"--compare-http", "--slo"} <= named for named in in_resolve)


def test_the_allowed_sites_still_exist() -> None:
    # An entry whose site went away would silently allow a new one in its place.
    seen = {(file, function) for file, function, _line, named in SITES if len(named) >= 2}
    assert set(ALLOWED) <= seen, set(ALLOWED) - seen

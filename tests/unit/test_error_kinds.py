"""Error stages and kinds are closed sets: errors.py, report/schema.json and the code agree.

mypy checks every value that flows into an error's ``stage``/``kind``; this holds the
Literals and the schema together, and scans the source for literals in case a call site
slips past mypy (an ``Any``, an ignore, a table nobody annotated).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import jsonschema
import pytest

import promptpath
from promptpath.cli.commands import usage_json
from promptpath.core.errors import (
    ErrorKind,
    ErrorStage,
    StreamError,
    UsageError,
    UsageKind,
    http_status_kind,
)
from promptpath.core.timeline import CONNECT_STAGES, ErrorInfo, StageName

PACKAGE = Path(promptpath.__file__).parent
SCHEMA = json.loads((PACKAGE / "report/schema.json").read_text())
DEFS = SCHEMA["$defs"]
KIND_ENUM, KIND_PATTERN = DEFS["error_kind"]["anyOf"]

STAGES = frozenset(get_args(ErrorStage))
KINDS = frozenset(get_args(ErrorKind))
#: Annotations that mark a variable or a table as holding stages or kinds.
KIND_TYPES = {"ErrorStage", "ErrorKind", "UsageKind"}


def _differ(name: str, python: frozenset[str], schema: list[str]) -> str:
    return (
        f"{name}: only in errors.py {sorted(python - set(schema))}, "
        f"only in schema.json {sorted(set(schema) - python)}"
    )


def test_schema_enumerates_the_stages_and_kinds_errors_py_defines() -> None:
    assert set(DEFS["error_stage"]["enum"]) == STAGES, _differ(
        "error_stage", STAGES, DEFS["error_stage"]["enum"]
    )
    assert set(KIND_ENUM["enum"]) == KINDS, _differ("error_kind", KINDS, KIND_ENUM["enum"])
    usage = frozenset(get_args(UsageKind))
    assert set(DEFS["usage_kind"]["enum"]) == usage, _differ(
        "usage_kind", usage, DEFS["usage_kind"]["enum"]
    )
    assert usage <= KINDS  # a usage error inside a trace lands in a run's error object


def _error_objects(node: object) -> Iterator[dict[str, object]]:
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and {"stage", "kind", "message"} <= props.keys():
            yield props
        for value in node.values():
            yield from _error_objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _error_objects(value)


def test_every_recorded_stage_is_a_stage_an_error_can_name() -> None:
    # phase_of returns the open stage as it stands: each StageName must be an ErrorStage,
    # and CONNECT_STAGES is the whole of StageName but the WebSocket upgrade (the request
    # itself: its time is the request and wait spans), in the order a trace opens them.
    assert set(get_args(StageName)) <= set(get_args(ErrorStage))
    assert get_args(StageName) == (*CONNECT_STAGES, "upgrade")
    order = [s for s in get_args(ErrorStage) if s in get_args(StageName)]
    assert order == [*CONNECT_STAGES, "upgrade"]


def test_every_error_object_in_the_schema_uses_the_closed_sets() -> None:
    found = list(_error_objects(SCHEMA))
    assert len(found) >= 2  # a run's (several copies) and the usage error's
    for props in found:
        assert props["stage"] in ({"$ref": "#/$defs/error_stage"}, {"const": "config"})
        expected = "usage_kind" if props["stage"] == {"const": "config"} else "error_kind"
        assert props["kind"] == {"$ref": f"#/$defs/{expected}"}


@pytest.mark.parametrize("status", [301, 401, 429, 503])
def test_http_status_kinds_match_the_schema_pattern_and_no_fixed_kind_does(status: int) -> None:
    assert re.fullmatch(KIND_PATTERN["pattern"], http_status_kind(status))
    assert not any(re.fullmatch(KIND_PATTERN["pattern"], kind) for kind in KINDS)


def test_the_schema_refuses_a_kind_outside_the_set() -> None:
    good = json.loads(usage_json(UsageError("bad port", kind="bad_option")))
    jsonschema.validate(good, SCHEMA)
    good["error"]["kind"] = "bad_vibes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(good, SCHEMA)


def test_error_info_from_error_keeps_the_fields_and_copies_the_detail() -> None:
    exc = StreamError("cut", stage="stream", kind="truncated", events=3)
    info = ErrorInfo.from_error(exc)
    assert (info.stage, info.kind, info.message, info.detail) == (
        "stream",
        "truncated",
        "cut",
        {"events": 3},
    )
    info.detail["events"] = 4
    assert exc.detail == {"events": 3}


# -- the source scan ------------------------------------------------------------------


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one function (or module) body, not of the functions nested in it."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _literals(expr: ast.expr | None) -> Iterator[tuple[str | None, int]]:
    """The strings an expression can evaluate to; None for an f-string (not checkable)."""
    if expr is None:
        return
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        yield expr.value, expr.lineno
    elif isinstance(expr, ast.JoinedStr):
        yield None, expr.lineno
    elif isinstance(expr, ast.Dict):  # a kind table: its values are kinds, its keys are not
        for value in expr.values:
            yield from _literals(value)
    elif isinstance(expr, ast.IfExp):
        yield from _literals(expr.body)
        yield from _literals(expr.orelse)
    elif isinstance(expr, ast.BoolOp):
        for value in expr.values:
            yield from _literals(value)
    elif isinstance(expr, ast.Call) and _name(expr.func) == "get" and len(expr.args) == 2:
        yield from _literals(expr.args[1])  # TABLE.get(key, default)


def _error_classes(trees: list[ast.Module]) -> set[str]:
    names = {"PromptpathError"}
    while True:
        more = {
            node.name
            for tree in trees
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and any(_name(base) in names for base in node.bases)
        }
        if more <= names:
            return names | {"ErrorInfo"}
        names |= more


def _is_error_class(expr: ast.expr, classes: set[str]) -> bool:
    """``StreamError``, or ``ConnectError if … else StreamError``."""
    if isinstance(expr, ast.IfExp):
        return _is_error_class(expr.body, classes) and _is_error_class(expr.orelse, classes)
    return _name(expr) in classes


def _super_inits(tree: ast.Module, classes: set[str]) -> set[ast.Call]:
    return {
        node
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and cls.name in classes
        for node in ast.walk(cls)
        if isinstance(node, ast.Call)
        and _name(node.func) == "__init__"
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Call)
        and _name(node.func.value.func) == "super"
    }


def _scan_scope(
    scope: ast.AST, classes: set[str], inits: set[ast.Call]
) -> Iterator[tuple[str, str | None, int]]:
    """(stage|kind, literal, line) for every literal that can become an error's field."""
    nodes = list(_own_nodes(scope))
    aliases = {
        target.id
        for node in nodes
        if isinstance(node, ast.Assign) and _is_error_class(node.value, classes)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    tracked: dict[str, str] = {}  # variable -> the field it ends up in
    for node in nodes:
        if isinstance(node, ast.Call) and (node in inits or _name(node.func) in classes | aliases):
            for kw in node.keywords:
                if kw.arg in ("stage", "kind"):
                    yield from ((kw.arg, text, line) for text, line in _literals(kw.value))
                    if isinstance(kw.value, ast.Name):
                        tracked[kw.value.id] = kw.arg
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)}
            if names & KIND_TYPES:
                tracked[node.target.id] = "stage" if "ErrorStage" in names else "kind"
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.returns is not None
            and _name(node.returns) in KIND_TYPES
        ):
            field = "stage" if _name(node.returns) == "ErrorStage" else "kind"
            for ret in _own_nodes(node):
                if isinstance(ret, ast.Return):
                    yield from ((field, text, line) for text, line in _literals(ret.value))
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in tracked:
                    field = tracked[target.id]
                    yield from ((field, text, line) for text, line in _literals(node.value))


def _findings(sources: dict[str, str]) -> Iterator[tuple[str, str, str | None, int]]:
    """(path, stage|kind, literal, line) over every function and module of ``sources``."""
    trees = {path: ast.parse(text) for path, text in sources.items()}
    classes = _error_classes(list(trees.values()))
    for path, tree in trees.items():
        inits = _super_inits(tree, classes)
        functions = (
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        )
        for scope in (tree, *functions):
            for field, text, line in _scan_scope(scope, classes, inits):
                yield path, field, text, line


def _scan(sources: dict[str, str]) -> list[str]:
    """Problems: literals outside the closed sets, and f-strings where a literal belongs."""
    problems = []
    for path, field, text, line in _findings(sources):
        if text is None:
            problems.append(
                f"{path}:{line}: an f-string as an error {field}; "
                "use a literal (or http_status_kind(status))"
            )
        elif text not in (STAGES if field == "stage" else KINDS):
            problems.append(
                f"{path}:{line}: error {field} {text!r} is not in errors.py "
                f"{'ErrorStage' if field == 'stage' else 'ErrorKind'} and "
                f"report/schema.json $defs/error_{field}: add it to both"
            )
    return problems


def _package_sources() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE.parent)): path.read_text()
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_every_stage_and_kind_literal_in_the_code_is_in_the_closed_sets() -> None:
    problems = _scan(_package_sources())
    assert not problems, "\n".join(problems)


def test_the_scan_reaches_the_kind_tables_and_the_computed_kinds() -> None:
    """The scan is only worth something if it sees the places kinds come from."""
    seen = {text for _, _, text, _ in _findings(_package_sources())}
    # One from each route: a TCP errno table, a TLS verify table and its .get default, a
    # reassigned variable, super().__init__, an alias, a returned stage, a UsageError.
    for literal in (
        "host_unreachable",
        "unknown_ca",
        "cert_verify_failed",
        "nodata",
        "malformed_event",
        "network_error",
        "first_token",
        "bad_config",
    ):
        assert literal in seen


SNIPPET = """
from promptpath.core.errors import DNSError, ErrorKind, StreamError

_TABLE: dict[int, ErrorKind] = {1: "nxdomain", 2: "made_up_table_kind"}

class OddError(StreamError):
    def __init__(self) -> None:
        super().__init__("odd", stage="stream", kind="made_up_super_kind")

def fail(status: int) -> None:
    kind = _TABLE.get(status, "made_up_default")
    if status == 3:
        kind = "made_up_reassigned"
    raise DNSError("x", stage="made_up_stage", kind=kind)

def status(status: int) -> None:
    cls = DNSError if status else StreamError
    raise cls("y", stage="dns", kind=f"http_{status}")
"""


def test_the_scan_names_each_kind_missing_from_the_sets() -> None:
    errors_py = (PACKAGE / "core/errors.py").read_text()  # where StreamError & co. come from
    problems = "\n".join(_scan({"promptpath/core/errors.py": errors_py, "snippet.py": SNIPPET}))
    for made_up in (
        "made_up_table_kind",
        "made_up_super_kind",
        "made_up_default",
        "made_up_reassigned",
        "made_up_stage",
    ):
        assert f"{made_up!r} is not in errors.py" in problems
    assert "snippet.py:18: an f-string as an error kind" in problems
    assert "nxdomain" not in problems

"""The output formats' table (promptpath/outputs/formats.py) is their only declaration:
the options of `run`, `probe` and `demo` come from its rows, each row's writer resolves
(and is imported only when written), and a new row is all a new format needs to be
checked before the run and written after it."""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import promptpath
from promptpath.core.errors import UsageError
from promptpath.outputs import formats
from promptpath.outputs.deliver import ExportPlan, plan_exports, write_exports
from promptpath.plan import flags
from tests.helpers.cli import fresh_import_shows

if TYPE_CHECKING:
    from promptpath.outputs.formats import WriteContext

PACKAGE = Path(promptpath.__file__).parent
SAMPLE: dict[str, Any] = json.loads((PACKAGE.parent / "examples/sample-run.json").read_text())


@pytest.mark.parametrize("fmt", formats.FORMATS, ids=lambda f: f.flag)
def test_each_formats_option_row_is_built_from_its_table_row(fmt: formats.Format) -> None:
    flag = flags.BY_DEST[fmt.dest]
    assert flag.decls == (fmt.flag,)
    assert (flag.help, flag.metavar, flag.commands) == (fmt.help, fmt.metavar, fmt.commands)
    assert flag.panel == flags.OUTPUT


@pytest.mark.parametrize("fmt", formats.FORMATS, ids=lambda f: f.flag)
def test_each_writer_named_by_the_table_writes_the_sample_report(fmt: formats.Format) -> None:
    if fmt.writer is None:  # the OTLP export: the SDK encodes it (outputs/otlp.py)
        assert fmt.goes == "collector"
        return
    text = fmt.render(SAMPLE, ExportPlan())
    assert isinstance(text, str) and text.strip()


def test_the_table_names_its_writers_without_importing_a_renderer() -> None:
    # flags.py reads the table on every --help: neither the writers nor report/ may load.
    loaded = fresh_import_shows(
        "import sys, promptpath.plan.flags\n"
        "print(sorted(m for m in sys.modules if m.startswith(('promptpath.report',"
        " 'promptpath.outputs.writers', 'promptpath.outputs.deliver'))))\n"
    )
    assert loaded == "[]", loaded


def test_demo_takes_exactly_its_table_rows_and_declares_no_option_inline() -> None:
    import typer.main

    from promptpath.cli.faces import app

    command = typer.main.get_group(app).commands["demo"]  # type: ignore[attr-defined]
    options = {p.name for p in command.params if p.param_type_name == "option"}
    assert options == {flag.dest for flag in flags.flags_of("demo")}
    assert {f.dest for f in formats.formats_of("demo")} == {"json_out", "html", "markdown", "svg"}
    # The Typer faces declare no option of their own but the root's --version.
    tree = ast.parse((PACKAGE / "cli/faces.py").read_text())
    inline = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "Option"
    ]
    assert len(inline) == 1, inline


def test_demos_output_help_is_runs() -> None:
    from tests.helpers.cli import run_cli

    def line(command: str, option: str) -> str:
        text = run_cli(command, "--help").stdout
        return " ".join(text.split(f"  {option} ", 1)[1].split("\n\n", 1)[0].split("--")[0].split())

    for option in ("--svg", "--html", "--json"):
        assert line("demo", option) == line("run", option), option


def _csv(report: Mapping[str, Any], _context: WriteContext) -> str:
    return f"target,exit_code\n{report['target']['url']},{report['exit_code']}\n"


def test_a_new_format_is_its_writer_plus_one_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = formats.Format(
        dest="csv",
        flag="--csv",
        help="Also write the run as CSV to FILE.",
        goes="file",
        writer=f"{__name__}:_csv",
        machine=True,
    )
    monkeypatch.setattr(formats, "FORMATS", (*formats.FORMATS, row))
    monkeypatch.setitem(formats.BY_DEST, "csv", row)  # type: ignore[index]
    out = tmp_path / "run.csv"
    plan = plan_exports({"csv": str(out)})
    assert plan.files == (("csv", out),) and plan.wanted
    assert write_exports(SAMPLE, plan) == []
    assert out.read_text() == _csv(SAMPLE, plan)
    # Its destination is checked before the run like every file's, by its own flag.
    with pytest.raises(UsageError, match="--junit and --csv name the same file"):
        plan_exports({"junit": str(out), "csv": str(out)})
    with pytest.raises(UsageError, match=r"--csv .*: is a directory"):
        plan_exports({"csv": str(tmp_path)})

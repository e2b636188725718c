"""The command line: parse options → call the library → pick a reporter → exit code.

Nothing here measures or formats by itself.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import sys
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from promptpath import __version__
from promptpath.cli import gchold
from promptpath.core.errors import PromptpathError
from promptpath.core.exitcodes import ExitCode
from promptpath.environment import Environment
from promptpath.plan import flags
from promptpath.probes.catalog import listed_names


def _show_help(ctx: typer.Context, _param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        Environment.of(ctx.obj).stdout.write(ctx.get_help() + "\n")
        ctx.exit()


class _HelpToEnvironment:
    """click prints --help on sys.stdout itself: send it to the Environment's stdout."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.callback = _show_help
        return option


class _Group(_HelpToEnvironment, TyperGroup):
    """The root group, its commands built only when one is run or its help shown.

    Building a click command from its options is most of a start-up after the imports
    (run and probe declare ~100 options each; ``serve``'s own import loads the server's
    behaviour tables): ``promptpath run`` builds ``run`` alone, ``promptpath --help``
    none, from their names and help texts (``_COMMANDS``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands()

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names, in order: TyperGroup's reads the values

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """TyperGroup's listing, each row from the command's help text without building it
        (tests/unit/test_cli_help.py holds it equal to the built commands' rows)."""
        commands = self.commands
        assert isinstance(commands, _LazyCommands)
        rows = [(name, commands.listed(name)) for name in self.list_commands(ctx)]
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])


class _Argument(TyperArgument):
    """Typer shows an argument as ``{TARGET}`` and ``TARGET <str>``: the metavar alone reads
    better, and its help line says what it is."""

    def make_metavar(self, ctx: Any, *, usage: bool = False) -> str:
        # An optional argument spells its brackets in its metavar ("[NAME]...").
        return self.metavar or super().make_metavar(ctx, usage=usage)

    # typer 0.29's hooks for the same two displays: pyproject pins typer below 0.29, but a
    # venv made before the pin still has it.
    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        return str(getattr(self, "display_name_raw", None) or self.metavar or self.name)


class _Command(_HelpToEnvironment, TyperCommand):
    def invoke(self, ctx: Any) -> Any:
        # The options are parsed: the start-up is over (the console script held the
        # collector off until here).
        gchold.release()
        return super().invoke(ctx)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Typer builds the parameters itself with no hook for their class; _Argument only
        # overrides two display methods, so changing the class of each one is safe.
        for param in self.params:
            if type(param) is TyperArgument:
                param.__class__ = _Argument

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """Options in their help panels (flags.PANELS), as curl's --help has categories.

        Typer draws panels only through rich (rich_markup_mode), whose import would cost
        every --help; click's plain formatter writes one section per panel instead."""
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                title = "Arguments"
            else:
                title = getattr(param, "rich_help_panel", None) or "Options"
            sections.setdefault(title, []).append(record)
        # run's panels in their order, then a command's own (watch's, the exporter's), then
        # the untitled rest (--help).
        order = ["Arguments", *flags.PANELS]
        last = len(order) + 1

        def rank(title: str) -> int:
            return (
                order.index(title) if title in order else last if title == "Options" else len(order)
            )

        for title in sorted(sections, key=rank):
            with formatter.section(title):
                formatter.write_dl(sections[title])


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Network-path diagnostics for streaming AI APIs: one real prompt, every stage timed.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(ctx: typer.Context, value: bool) -> None:
    if value:
        print(f"promptpath {__version__}", file=Environment.of(ctx.obj).stdout)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """promptpath: where did the time go on this prompt?"""


def _no_trio() -> None:
    """httpcore imports trio when it is installed (~90 ms measured) only to support it; the
    CLI runs on asyncio, so it tells Python there is no trio before httpcore loads. Library
    users who import promptpath.tracer.orchestrator directly are untouched."""
    if "trio" not in sys.modules and "httpcore" not in sys.modules:
        sys.modules["trio"] = None  # type: ignore[assignment]


# -- run and probe: their options are declared once, in promptpath/plan/flags.py ----------------
_CTX = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
_TARGET = inspect.Parameter(
    "target",
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    annotation=Annotated[
        str,
        typer.Argument(
            metavar="TARGET",
            help="Endpoint URL (e.g. https://api.openai.com/v1/chat/completions) or a"
            " profile name.",
        ),
    ],
)
_NAMES = inspect.Parameter(
    "names",
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    default=None,
    annotation=Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[NAME]...",
            help=f"Probes to run: {listed_names()} (default: all).",
        ),
    ],
)


def _execute(ctx: typer.Context, values: dict[str, object]) -> None:
    _no_trio()
    from promptpath.cli.commands import execute

    raise typer.Exit(execute(values, env=Environment.of(ctx.obj)))


@flags.declare("run", _CTX, _TARGET)
def run(ctx: typer.Context, target: str, **values: object) -> None:
    """Trace one streamed prompt to TARGET, stage by stage."""
    _execute(ctx, {"target": target, **values})


@flags.declare("probe", _CTX, _TARGET, _NAMES)
def probe(ctx: typer.Context, target: str, names: list[str] | None, **values: object) -> None:
    """Trace one prompt to TARGET, then run probes (all of them unless named)."""
    # The same trace as `run`, with the probe names as positional arguments.
    _execute(ctx, {"target": target, **values, "probe": names or ["all"]})


@flags.declare("demo", _CTX)
def demo(ctx: typer.Context, **values: object) -> None:
    """Trace a prompt against a built-in reference endpoint on loopback (no network, no key)."""
    _no_trio()
    from promptpath.cli.demo import DemoArgs, run_demo

    raise typer.Exit(run_demo(DemoArgs.of(values), env=Environment.of(ctx.obj)))


def _watch_flags() -> tuple[flags.Flag, ...]:
    from promptpath.plan.watch_options import FLAGS

    return FLAGS


@flags.declare("watch", _CTX, _TARGET, table=_watch_flags())
def watch(ctx: typer.Context, target: str, **values: object) -> None:
    """Trace TARGET again and again, mtr-style: rolling statistics per stage, an event
    when one leaves its band or a fact changes (q quits, p pauses, r resets)."""
    _no_trio()
    from promptpath.cli.watch import execute_watch

    raise typer.Exit(execute_watch({"target": target, **values}, env=Environment.of(ctx.obj)))


_EXPORTER_HELP = """Serve /probe and /metrics for Prometheus, as blackbox_exporter does.

GET /probe?target=NAME&module=MODULE traces one prompt to a target the config names (and
runs the module's probes), within the scrape's timeout, and answers the textfile export's
metrics plus probe_success and probe_duration_seconds. A target the config does not name,
or a URL, is refused (400) without any connection. GET /metrics is the exporter's own
health; SIGHUP (or POST /-/reload, with --web.enable-lifecycle) reloads the config;
SIGTERM drains. See docs/exporter.md.
"""


@flags.declare("exporter", _CTX)
def exporter(ctx: typer.Context, **values: object) -> None:
    _no_trio()
    from promptpath.cli.commands import execute_exporter

    raise typer.Exit(execute_exporter(values, env=Environment.of(ctx.obj)))


_BEFORE_FILE = inspect.Parameter(
    "before_file",
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    annotation=Annotated[
        str,
        typer.Argument(
            metavar="BEFORE",
            help="A run, series or --compare-http JSON document, or a watch history.",
        ),
    ],
)
_AFTER_FILE = inspect.Parameter(
    "after_file",
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    default=None,
    annotation=Annotated[
        str | None,
        typer.Argument(
            metavar="[AFTER]",
            help="The document to compare BEFORE with (none: BEFORE is a history and"
            " --before/--after pick its two time ranges).",
        ),
    ],
)


@flags.declare("diff", _CTX, _BEFORE_FILE, _AFTER_FILE)
def diff(ctx: typer.Context, before_file: str, after_file: str | None, **values: object) -> None:
    """What changed between two runs, series or time ranges, against each side's noise."""
    from promptpath.cli.diff import execute_diff

    values = {"before_file": before_file, "after_file": after_file, **values}
    raise typer.Exit(execute_diff(values, env=Environment.of(ctx.obj)))


_MCP_HELP = """Serve promptpath's tools to an AI assistant over MCP (stdio).

The tools: list_profiles, trace, run_probes (and diff_reports): each input schema made
from this command line's options, each result the JSON `run --json` prints and the verdict
line. Only the targets the config names may be probed (anything else is refused before any
connection), keys come from the environment and the config, never from a tool call, and
each client connection has a spend limit. Needs the mcp extra. See docs/mcp.md.
"""


@flags.declare("mcp", _CTX)
def mcp(ctx: typer.Context, **values: object) -> None:
    _no_trio()
    from promptpath.mcpserver.run import run_mcp

    config = values.get("config")
    raise typer.Exit(run_mcp(config if isinstance(config, str) else None, Environment.of(ctx.obj)))


_VANTAGE_HELP = """Compare vantage points through Prometheus: what exporters recorded, as a table.

Asks Prometheus' HTTP API (instant queries: quantile_over_time and count_over_time over
--since) for what exporters labelled with a vantage (their config's vantage, or --label)
recorded, and prints a vantage × stage table: p50 and p95 of each stage, the share of
failed probes, the edge each vantage reached. The vantage and stages that stand out are
named, judged against the others' spread and the practical floors `diff` uses. See
docs/vantage.md.
"""


def _vantage() -> Callable[..., Any]:
    from promptpath.plan.vantage_flags import FLAGS as VANTAGE_FLAGS

    @flags.declare("vantage", _CTX, table=VANTAGE_FLAGS)
    def vantage(ctx: typer.Context, **values: object) -> None:
        from promptpath.cli.vantage import execute_vantage

        raise typer.Exit(execute_vantage(values, env=Environment.of(ctx.obj)))

    return vantage


#: serve's help is its function's docstring (server/command.py: the dialects it speaks come
#: from the server's registry); --help's list of commands shows this line without loading
#: it (tests/unit/test_cli_help.py holds the two equal).
_SERVE_LISTED = "Run the reference endpoint (a streaming API you control)."


def _serve() -> Callable[..., Any]:
    from promptpath.server.command import serve  # the server's tables: only for `serve`

    return serve


#: The commands in --help's order: how to get each one's function (``serve``'s lives in
#: promptpath.server), and its help when the function's docstring is not it.
_COMMANDS: dict[str, tuple[Callable[[], Callable[..., Any]], str | None]] = {
    "run": (lambda: run, None),
    "probe": (lambda: probe, None),
    "demo": (lambda: demo, None),
    "serve": (_serve, None),
    "exporter": (lambda: exporter, _EXPORTER_HELP),
    "diff": (lambda: diff, None),
    "mcp": (lambda: mcp, _MCP_HELP),
    "vantage": (_vantage, _VANTAGE_HELP),
    "watch": (lambda: watch, None),
}


def _help_of(name: str) -> str:
    if name == "serve":
        return _SERVE_LISTED
    load, help_text = _COMMANDS[name]
    return inspect.cleandoc(help_text) if help_text is not None else inspect.getdoc(load()) or ""


def build_command(name: str) -> Any:
    """The click command ``promptpath NAME`` runs, built by Typer from its function as
    the group would build it (typer.main.get_command on a one-command app)."""
    load, help_text = _COMMANDS[name]
    one = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    one.command(name, cls=_Command, help=help_text)(flags.signed(load()))
    return typer.main.get_command(one)


class _LazyCommands(MutableMapping[str, Any]):
    """The group's commands by name, each built on first use (``build_command``)."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in _COMMANDS:
                raise KeyError(name)
            self._built[name] = build_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter([*_COMMANDS, *(n for n in self._built if n not in _COMMANDS)])

    def __len__(self) -> int:
        return len(list(iter(self)))

    def listed(self, name: str) -> Any:
        """The command as --help lists it: built if it is, else a bare command carrying
        its help text (the listing reads nothing else)."""
        if name in self._built or name not in _COMMANDS:
            return self[name]
        return TyperCommand(name=name, help=_help_of(name))


def main(argv: Sequence[str] | None = None, env: Environment | None = None) -> int:
    """The command line, as an exit code: the contract; tracebacks never reach users.

    The console script passes nothing (the real process); tests pass an Environment of
    StringIO streams and a dict, and ``argv`` without the program name."""
    if env is None:
        env = Environment.from_process()
    if argv is not None:
        env = dataclasses.replace(env, argv=tuple(argv))
    from promptpath.core.errors import UsageError
    from promptpath.options import check_argv_utf8

    try:
        # Before click sees them: an argument from bytes that are not UTF-8 carries lone
        # surrogates (surrogateescape) that would otherwise reach the server.
        check_argv_utf8(env.argv)
    except UsageError as exc:
        print(f"promptpath: {exc.message}", file=env.stderr)
        if "--json" in env.argv:
            from promptpath.cli.commands import usage_json

            print(usage_json(exc), file=env.stdout)
        return int(exc.exit_code)
    try:
        # Not standalone: click would print usage errors without JSON and turn Ctrl-C into
        # "Aborted!" with exit 1. The Environment rides on the click context (ctx.obj).
        code = app(args=list(env.argv), prog_name="promptpath", standalone_mode=False, obj=env)
    except KeyboardInterrupt:
        print("promptpath: interrupted", file=env.stderr)
        return int(ExitCode.INTERRUPTED)
    except PromptpathError as exc:  # errors raised before a reporter took over
        print(f"promptpath: {exc.message}", file=env.stderr)
        return int(exc.exit_code)
    except Exception as exc:
        return _click_or_bug(exc, env)
    return code if isinstance(code, int) else 0


def _click_or_bug(exc: Exception, env: Environment) -> int:
    # Typer ships its own copy of click, so its exceptions are recognised by shape.
    if type(exc).__name__ == "Abort":
        print("promptpath: interrupted", file=env.stderr)
        return int(ExitCode.INTERRUPTED)
    show = getattr(exc, "show", None)
    exit_code = getattr(exc, "exit_code", None)
    if callable(show) and isinstance(exit_code, int):
        message = getattr(exc, "format_message", lambda: str(exc))()
        unknown = _unknown_option(exc)
        if unknown is not None:
            message = unknown
            print(f"promptpath: {unknown}", file=env.stderr)
        else:
            show(file=env.stderr)
        if "--json" in env.argv and exit_code == ExitCode.USAGE:
            from promptpath.cli.commands import usage_json
            from promptpath.core.errors import UsageError

            print(usage_json(UsageError(str(message))), file=env.stdout)
        return exit_code
    if env.debug:
        raise exc
    # A bug of ours: one line, a distinct code, no traceback.
    from promptpath.core.textsafe import visible

    # The exception's text may quote bytes a server sent: shown, never obeyed.
    print(f"promptpath: internal error: {type(exc).__name__}: {visible(str(exc))}", file=env.stderr)
    print("promptpath: set PROMPTPATH_DEBUG=1 for the traceback", file=env.stderr)
    return int(ExitCode.INTERNAL)


def _unknown_option(exc: Exception) -> str | None:
    """click's NoSuchOption as one line naming the nearest real option, if one is near."""
    name = getattr(exc, "option_name", None)
    command = getattr(getattr(exc, "ctx", None), "command", None)
    if not isinstance(name, str) or command is None:
        return None
    known = [o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if near:
        return f"no such option {name}: did you mean {near[0]}?"
    return f"no such option {name} (promptpath {command.name} --help lists them)"


__all__ = ["app", "main"]

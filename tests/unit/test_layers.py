"""The architecture, checked: which layer may import which, and no import cycles.

Imports inside functions count too (a lazy import is still a dependency). The rules:
the socket layer (``net``) and the stream decoders (``streams``) import only themselves
and the pure data everyone shares; the pure core reads no socket, clock or reporter;
reporters never reach into the socket layer; and no two modules import each other,
directly or around a loop.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "promptpath"

#: Modules every layer may use: plain data, the error tree, and the pure helpers that
#: would otherwise be written again in each layer (addresses, credential headers, stream
#: media types). These import nothing of promptpath beyond each other.
SHARED = (
    "promptpath.core.timeline",
    "promptpath.core.errors",
    "promptpath.core.exitcodes",
    "promptpath.core.addr",
    "promptpath.core.headers",
    "promptpath.core.media",
    "promptpath.core.wsclose",  # WebSocket close codes in words: the transport and reports
    "promptpath.core.rtt",  # the path's round trip: the transports measure, reports show it
)

#: layer prefix -> prefixes it may import (besides itself and SHARED)
ALLOWED: dict[str, tuple[str, ...]] = {
    "promptpath.core": (),  # the pure core: only itself
    "promptpath.net": (),  # the socket layer: no options, tracer, probes or reporters
    "promptpath.streams": (),
    "promptpath.tracer.ingest": ("promptpath.streams", "promptpath.dialects"),
    # What a run hands reporters: its options and what the run found, nothing that traces.
    "promptpath.result": ("promptpath.core.findings", "promptpath.options"),
    # How requests find connections: the transport seam and nothing of the tracer above it.
    "promptpath.tracer.strategy": ("promptpath.net.transport",),
    # The export renderers read the JSON report (a dict), never a TraceResult or a socket.
    "promptpath.report.runs": (),
    "promptpath.report.har": ("promptpath.report.runs",),
    "promptpath.report.junit": ("promptpath.report.runs",),
    "promptpath.report.prometheus": ("promptpath.report.runs", "promptpath.core.stats"),
    # (and the dialects' plug-ins, whose gen_ai.provider.name each holds)
    "promptpath.report.otel": (
        "promptpath.report.runs",
        "promptpath.dialects",
        "promptpath.report.otel_names",
        "promptpath.report.otel_tokens",
    ),
    "promptpath.report.otel_tokens": ("promptpath.dialects",),
    # The GenAI conventions' names in both settings: a table, nothing of promptpath.
    "promptpath.report.otel_names": (),
    # The SDK side of the OTLP export: the telemetry the pure mapping made, nothing else.
    "promptpath.outputs.otlp_sdk": ("promptpath.report.otel", "promptpath.report.otel_names"),
    # The option table is read by every --help: typer, the probes' plain settings and
    # names, the output formats' table and the dialects' names only.
    "promptpath.plan.flags": (
        "promptpath.probes.settings",
        "promptpath.probes.catalog",
        "promptpath.outputs.formats",
        "promptpath.dialects.registry",
    ),
    # The probes' names, read by --help: nothing else.
    "promptpath.probes.catalog": (),
    # The formats' table is read by every --help: it names its writers, never imports them.
    "promptpath.outputs.formats": (),
    # The dialects' names, read by every --help: nothing of promptpath, no plug-in.
    "promptpath.dialects.registry": (),
    # A plug-in builds on the framing and decoding toolkit (streams), the emulation toolkit
    # (server.dialect, and the token count it uses) and the run options it shapes a
    # request from: it never traces, touches a socket, reports or hosts the server.
    "promptpath.dialects": (
        "promptpath.streams",
        "promptpath.options",
        "promptpath.server.dialect",
        "promptpath.server.tokens",
    ),
    # (net.dnsmsg parses --authoritative, core.urlsafe quotes a bad --canary-admin: each
    # imported only when one is given)
    "promptpath.probes.settings": ("promptpath.net.dnsmsg", "promptpath.core.urlsafe"),
}
#: The top floor, bottom up: options -> plan -> outputs' destinations -> modes -> cli.
_ABOVE_PLAN = ("promptpath.modes", "promptpath.report", "promptpath.cli")
#: layer prefix -> prefixes it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "promptpath.tracer": ("promptpath.probes", "promptpath.report", "promptpath.cli"),
    # Reporters read a TraceResult (promptpath.result) and what its timeline recorded,
    # including the request as sent: they never prepare, trace or touch a socket.
    "promptpath.report": (
        "promptpath.net",
        "promptpath.tracer",
        "promptpath.probes",
        "promptpath.cli",
        "promptpath.modes",
    ),
    "promptpath.probes": ("promptpath.report", "promptpath.cli", "promptpath.modes"),
    "promptpath.server": ("promptpath.tracer", "promptpath.probes", "promptpath.report"),
    # The emulation toolkit lies below the plug-ins built on it.
    "promptpath.server.dialect": ("promptpath.dialects",),
    "promptpath.server.tokens": ("promptpath.dialects",),
    # Each storey of the top floor reads the ones below it only.
    "promptpath.plan": _ABOVE_PLAN,
    "promptpath.modes": ("promptpath.cli", "promptpath.plan.resolve", "promptpath.plan.flags"),
    # The plumbing every mode shares lies below the modes themselves.
    "promptpath.modes.runner": ("promptpath.modes.single", "promptpath.modes.series"),
    "promptpath.modes.outcome": ("promptpath.modes.single", "promptpath.modes.series"),
    # A service on top of the Plan, as the run command is: it never imports the reference
    # server (a probe of a real endpoint must not carry hypercorn in) nor the CLI.
    "promptpath.exporter": ("promptpath.server", "promptpath.cli", "promptpath.net"),
    # `promptpath mcp`: a face on the exporter's config, guard and probe run (and the diff
    # command's reading): never the reference server, the socket layer, or the rest of the
    # command line.
    "promptpath.mcpserver": (
        "promptpath.server",
        "promptpath.net",
        "promptpath.cli.commands",
        "promptpath.cli.faces",
        "promptpath.cli.entry",
    ),
    # Writes, pushes and sends what the report holds (the JSON object): it neither traces,
    # runs a mode nor parses the command line. The plan reads its destinations' checks.
    "promptpath.outputs": (
        "promptpath.net",
        "promptpath.tracer",
        "promptpath.probes",
        "promptpath.cli",
        "promptpath.modes",
        "promptpath.plan",
    ),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[str]:
    """Every promptpath module ``path`` imports, at the top or inside a function."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("promptpath"):
                continue
            yield node.module
            for alias in node.names:  # "from promptpath.net import dns" imports a module
                candidate = f"{node.module}.{alias.name}"
                if (PACKAGE.parent / (candidate.replace(".", "/") + ".py")).exists():
                    yield candidate
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("promptpath"))


def _graph() -> dict[str, set[str]]:
    return {
        _module_name(path): set(_imports(path)) - {"promptpath"}
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


GRAPH = _graph()


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_lower_layers_import_only_what_lies_below_them(layer: str) -> None:
    allowed = (layer, *SHARED, *ALLOWED[layer])
    wrong = sorted(
        f"{module} imports {dep}"
        for module, deps in GRAPH.items()
        if _within(module, layer)
        for dep in deps
        if not any(_within(dep, ok) for ok in allowed)
    )
    assert not wrong, f"{layer} reaches above itself:\n" + "\n".join(wrong)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_keep_out_of_what_they_must_not_touch(layer: str) -> None:
    wrong = sorted(
        f"{module} imports {dep}"
        for module, deps in GRAPH.items()
        if _within(module, layer)
        for dep in deps
        if any(_within(dep, banned) for banned in FORBIDDEN[layer])
    )
    assert not wrong, "\n".join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in graph.get(node, ()):
            if dep not in graph:
                continue
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_the_packages_modules() -> None:
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    # The check above must be able to fail.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_shared_helpers_import_nothing_but_each_other() -> None:
    # Every layer may import SHARED, so SHARED must not lead back up into a layer.
    wrong = sorted(
        f"{module} imports {dep}"
        for module in SHARED
        for dep in GRAPH[module]
        if not any(_within(dep, ok) for ok in SHARED)
    )
    assert not wrong, "\n".join(wrong)


#: The nouns every storey reads stay at the package root; everything else lives in a storey.
ROOT_MODULES = {"__init__", "__main__", "options", "result", "environment", "proxies"}


def test_the_package_root_keeps_only_the_shared_nouns() -> None:
    here = {path.stem for path in PACKAGE.glob("*.py")}
    assert here == ROOT_MODULES, f"a loose module at the root: {sorted(here - ROOT_MODULES)}"

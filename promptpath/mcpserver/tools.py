"""The MCP tools promptpath offers, and each one's input schema, made from the CLI's option
table (plan/flags.py): no option is declared a second time here.

A tool names the options it takes by their ``dest`` in the table; its JSON Schema property
is the row's type, help line, choices (a ``a|b|c`` metavar, or the probes' catalog for
``probe``) and minimum. The rest of a tool's arguments are its own: ``target`` and
``module`` (where, by the allow-list's names), ``dry_run``, and the two report files of
``diff_reports``.

Which options a tool takes is chosen with the allow-list in mind: nothing that would send
a packet anywhere but the allowed target (--resolve, --connect-to, --proxy, --resolver,
--authoritative, --canary-admin, --otlp-endpoint, --pushgateway), choose what credential
is sent (--api-key-env, --header: keys come from the environment and the config only),
write files (--json FILE, --html …) or weaken TLS (--insecure, --cacert, --cert, --key,
--allow-cleartext). Those stay the config's.

Pure: imports the option table and the probes' names, never the SDK (tested without it).
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from promptpath.core.errors import UsageError
from promptpath.plan.flags import BY_DEST, Flag
from promptpath.probes.catalog import NAMES as PROBE_NAMES

#: The options a traced prompt may take from an agent: what is asked, not where it goes.
TRACE_OPTIONS: Final = ("model", "prompt", "max_tokens", "timeout", "http", "client")
#: The probe settings an agent may set (their probes' own knobs; none names a host).
PROBE_OPTIONS: Final = ("dns_recheck", "idle_max", "tls_warn_days", "tls_fail_days")

_CHOICE = re.compile(r"^[\w.\-]+(\|[\w.\-]+)+$")
_TARGET: Final = {
    "type": "string",
    "description": "A target the config's allow-list names ([targets.NAME]), or its URL"
    " exactly; anything else is refused before any connection.",
    "minLength": 1,
    "maxLength": 2048,
}
_MODULE: Final = {
    "type": "string",
    "description": "The module ([modules.NAME]) to run it with; default: the target's first.",
    "minLength": 1,
    "maxLength": 200,
}
_DRY_RUN: Final = {
    "type": "boolean",
    "description": "Only state what it would cost and whether the spend limit allows it.",
    "default": False,
}
_REPORT: Final = {
    "type": "string",
    "description": "A saved report (`run --json > FILE`), by its path.",
    "minLength": 1,
    "maxLength": 4096,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """One tool: its name, what it does, the option rows it takes and its own arguments."""

    name: str
    description: str
    options: tuple[str, ...] = ()
    own: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    required: tuple[str, ...] = ()


TOOLS: Final = (
    ToolSpec(
        name="list_profiles",
        description="The targets this server may probe (its config's allow-list), each with"
        " its modules, what one trace of it may spend, and the connection's spend so far.",
    ),
    ToolSpec(
        name="trace",
        description="Trace one streamed prompt to an allowed target, stage by stage (DNS,"
        " connect, TLS, request, wait, first token, streaming), as `promptpath run --json`."
        " Returns the verdict line and the run's JSON document. Spends up to max_tokens.",
        options=TRACE_OPTIONS,
        own={"target": _TARGET, "module": _MODULE, "dry_run": _DRY_RUN},
        required=("target",),
    ),
    ToolSpec(
        name="run_probes",
        description="Trace one prompt to an allowed target, then run the named probes"
        " (buffering proxies, idle timeouts, DNS caching, TLS, path, MTU, …), as `promptpath"
        " probe --json`. Their stated cost is given before they run; a run past the"
        " connection's spend limit is refused.",
        options=("probe", *TRACE_OPTIONS, *PROBE_OPTIONS),
        own={"target": _TARGET, "module": _MODULE, "dry_run": _DRY_RUN},
        required=("target", "probe"),
    ),
    ToolSpec(
        name="diff_reports",
        description="What changed between two saved documents (run, series or --compare-http"
        " JSON, or a watch history), judged against each side's noise, as `promptpath diff"
        " --json`; or two time ranges of one watch history (before_range, after_range)."
        " Reads the files named, sends nothing, spends nothing.",
        options=("before_range", "after_range", "protocol"),
        own={
            "before": _REPORT,
            "after": {
                **_REPORT,
                "description": "The document to compare before with (none:"
                " before is a watch history and the two ranges pick its sides).",
            },
        },
        required=("before",),
    ),
)


def _json_type(annotation: Any) -> dict[str, Any]:
    """The JSON Schema type of a row's annotation (``int | None`` is an integer that may
    be left out: a tool argument is optional unless required)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return _json_type(args[0])
    if typing.get_origin(annotation) is list:
        return {"type": "array", "items": _json_type(args[0]), "maxItems": 64}
    for python, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if annotation is python:
            return {"type": name}
    raise TypeError(f"no JSON Schema type for {annotation!r}")


def option_schema(flag: Flag) -> dict[str, Any]:
    """One option row as a JSON Schema property."""
    schema = _json_type(flag.type)
    schema["description"] = f"{flag.decls[0]}: {flag.help}"
    target = schema["items"] if schema["type"] == "array" else schema
    if flag.dest == "probe":
        target["enum"] = [*PROBE_NAMES, "all"]
    elif flag.metavar and _CHOICE.match(flag.metavar):
        target["enum"] = flag.metavar.split("|")
    if target["type"] == "string" and "enum" not in target:
        target["maxLength"] = 4096
    if "min" in flag.extra:
        target["minimum"] = flag.extra["min"]
    if flag.default not in (None, False) and not isinstance(flag.default, list):
        schema["default"] = flag.default
    return schema


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's input schema: its own arguments, then its option rows."""
    properties: dict[str, Any] = {k: dict(v) for k, v in spec.own.items()}
    for dest in spec.options:
        properties[dest] = option_schema(BY_DEST[dest])
    return {
        "type": "object",
        "properties": properties,
        "required": list(spec.required),
        "additionalProperties": False,
    }


def spec_of(name: str, offered: tuple[ToolSpec, ...]) -> ToolSpec:
    for spec in offered:
        if spec.name == name:
            return spec
    raise UsageError(
        f"no tool {name!r} (tools: {', '.join(s.name for s in offered)})", kind="bad_option"
    )


def checked(spec: ToolSpec, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """``arguments`` checked against the tool's schema (the SDK hands them on unchecked);
    UsageError naming the first problem. A value is never quoted back: an argument may
    hold what must not be echoed."""
    from jsonschema import Draft202012Validator

    given = dict(arguments or {})
    unknown = sorted(set(given) - set(spec.own) - set(spec.options))
    if unknown:
        raise UsageError(
            f"{spec.name} takes no argument {unknown[0]!r} (keys and endpoints come from"
            " the config and the environment, never from a tool call)",
            kind="bad_option",
        )
    errors = sorted(
        Draft202012Validator(input_schema(spec)).iter_errors(given), key=lambda e: list(e.path)
    )
    if errors:
        first = errors[0]
        where = ".".join(str(p) for p in first.absolute_path) or "arguments"
        what = first.validator
        hint = {
            "required": "is missing",
            "enum": "is not one of the choices",
            "type": f"must be {first.validator_value}",
        }.get(str(what), f"fails {what} {first.validator_value!r}")
        if what == "required":
            where = str(first.message).split("'")[1] if "'" in first.message else where
        raise UsageError(f"{spec.name}: {where} {hint}", kind="bad_option")
    return given


__all__ = [
    "PROBE_OPTIONS",
    "TOOLS",
    "TRACE_OPTIONS",
    "ToolSpec",
    "checked",
    "input_schema",
    "option_schema",
    "spec_of",
]

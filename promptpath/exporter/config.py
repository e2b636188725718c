"""The exporter's TOML config: modules (how to probe) and targets (the allow-list).

    [exporter]
    max_in_flight = 4               # probes running at once, over every target
    min_interval_s = 60             # default per target: a sooner scrape gets the last result
    daily_token_budget = 20000      # default per target (UTC day); 0 = no budget
    scrape_timeout_offset_s = 0.5   # the probe ends this long before Prometheus gives up
    otlp_endpoint = "http://127.0.0.1:4318"   # each fresh probe's spans and metrics (OTLP/HTTP)

    [modules.chat]                  # a profile's keys (no url), plus the probes to run
    provider = "openai"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"
    as = "openai-python"
    timeout = 20
    max_tokens = 16
    probes = ["buffering", "tls"]

    [targets.prod-openai]           # the only names /probe?target= accepts
    url = "https://api.openai.com/v1/chat/completions"
    modules = ["chat"]              # optional: the modules that may probe it (default: all)
    min_interval_s = 300
    daily_token_budget = 5000

A target may also carry the path keys of a profile (cacert, insecure, resolve, resolver,
proxy, noproxy, cert, key), which win over a module's. Every (target, module) pair is
resolved into a Plan when the config loads, through the same code as `run PROFILE`: a
config that would fail a run fails the load (and a reload keeps the old one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptpath.core.errors import PromptpathError, UsageError
from promptpath.plan.plan import Plan
from promptpath.plan.profiles import PROFILE_KEYS, check_value, read_toml

#: Module keys: a profile's, less the target's URL, inline keys and SLOs, plus probes.
MODULE_KEYS: dict[str, type | tuple[type, ...]] = {
    **{k: v for k, v in PROFILE_KEYS.items() if k not in ("url", "api_key", "slo")},
    "probes": list,
    # A saved series or run (--json) each probe's figures are divided by: the answer then
    # carries promptpath_baseline_ratio{metric} (docs/exporter.md).
    "baseline": str,
}
#: Where a target is and how to reach it: a profile's path keys.
PATH_KEYS = ("cacert", "insecure", "resolve", "resolver", "proxy", "noproxy", "cert", "key")
TARGET_KEYS: dict[str, type | tuple[type, ...]] = {
    "url": str,
    **{k: PROFILE_KEYS[k] for k in PATH_KEYS},
    "modules": list,
    "min_interval_s": (int, float),
    "daily_token_budget": int,
}
GLOBAL_KEYS: dict[str, type | tuple[type, ...]] = {
    "max_in_flight": int,
    "min_interval_s": (int, float),
    "daily_token_budget": int,
    "scrape_timeout_offset_s": (int, float),
    "otlp_endpoint": str,
}
DEFAULT_MAX_IN_FLIGHT = 4
DEFAULT_MIN_INTERVAL_S = 60.0
DEFAULT_OFFSET_S = 0.5
_TOP = ("exporter", "modules", "targets")


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One (target, module) pair, resolved: what a scrape of it runs and may spend."""

    target: str
    module: str
    plan: Plan
    #: The most one probe may spend: the trace's token cap plus each probe's declared
    #: tokens (what the daily budget is charged, whatever the server reports).
    tokens: int
    #: The module's baseline: SLO metric name (``ttft_p50``...) → its value; None: none.
    baseline: Mapping[str, float | None] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    name: str
    url: str
    modules: frozenset[str]
    min_interval_s: float
    daily_token_budget: int  # 0: none


@dataclass(frozen=True, slots=True, kw_only=True)
class ExporterConfig:
    path: Path
    targets: Mapping[str, Target]
    modules: tuple[str, ...]
    probes: Mapping[tuple[str, str], Probe]
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    scrape_timeout_offset_s: float = DEFAULT_OFFSET_S
    #: The OTLP/HTTP collector every fresh probe's spans and metrics go to (base URL).
    otlp_endpoint: str | None = None
    otlp_resource: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def probe(self, target: str, module: str) -> Probe | None:
        return self.probes.get((target, module))


def _bad(path: Path, message: str) -> UsageError:
    return UsageError(f"{path}: {message}", kind="bad_config")


def _table(path: Path, data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _bad(path, f"[{key}] must be a table")
    return value


def _check_table(
    path: Path, what: str, table: object, keys: Mapping[str, type | tuple[type, ...]]
) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise _bad(path, f"{what} must be a table")
    for key, value in table.items():
        check_value(path, what, key, value, keys)
    return table


def _seconds(path: Path, what: str, value: float, *, positive: bool = False) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0 or (positive and value == 0) or value > 86400:
        raise _bad(path, f"{what} must be between 0 and 86400 seconds, got {value:g}")
    return value


def load(path: Path, environ: Mapping[str, str]) -> ExporterConfig:
    """The config at ``path``, every pair resolved; UsageError (bad_config) naming the file,
    the table and the key otherwise."""
    data = read_toml(path)
    unknown = sorted(set(data) - set(_TOP))
    if unknown:
        raise _bad(path, f"unknown table [{unknown[0]}] (known: {', '.join(_TOP)})")
    glob = _check_table(path, "[exporter]", _table(path, data, "exporter"), GLOBAL_KEYS)
    max_in_flight = int(glob.get("max_in_flight", DEFAULT_MAX_IN_FLIGHT))
    if not 1 <= max_in_flight <= 1000:
        raise _bad(path, f"[exporter] max_in_flight must be 1 to 1000, got {max_in_flight}")
    default_interval = _seconds(
        path, "[exporter] min_interval_s", glob.get("min_interval_s", DEFAULT_MIN_INTERVAL_S)
    )
    default_budget = _budget(path, "[exporter]", glob.get("daily_token_budget", 0))
    offset = _seconds(
        path,
        "[exporter] scrape_timeout_offset_s",
        glob.get("scrape_timeout_offset_s", DEFAULT_OFFSET_S),
    )
    otlp = glob.get("otlp_endpoint")
    resource: tuple[tuple[str, str], ...] = ()
    if otlp is not None:
        otlp, resource = _otlp(path, otlp, environ)

    modules = {
        name: _check_table(path, f"module {name!r}", table, MODULE_KEYS)
        for name, table in _table(path, data, "modules").items()
    }
    if not modules:
        raise _bad(path, "no [modules.NAME] table: a module says how to probe")
    targets: dict[str, Target] = {}
    tables: dict[str, dict[str, Any]] = {}
    for name, table in _table(path, data, "targets").items():
        what = f"target {name!r}"
        table = _check_table(path, what, table, TARGET_KEYS)
        if "url" not in table:
            raise _bad(path, f"{what} has no url")
        allowed = table.get("modules")
        named = frozenset(modules) if allowed is None else frozenset(allowed)
        missing = sorted(named - set(modules))
        if missing:
            raise _bad(path, f"{what} names the module {missing[0]!r}, which is not defined")
        targets[name] = Target(
            name=name,
            url=table["url"],
            modules=named,
            min_interval_s=_seconds(
                path, f"{what} min_interval_s", table.get("min_interval_s", default_interval)
            ),
            daily_token_budget=_budget(path, what, table.get("daily_token_budget", default_budget)),
        )
        tables[name] = table
    if not targets:
        raise _bad(path, "no [targets.NAME] table: the exporter probes only the targets named")
    probes = {
        (t, m): _resolved(path, t, m, tables[t], modules[m], environ)
        for t, target in targets.items()
        for m in sorted(target.modules)
    }
    return ExporterConfig(
        path=path,
        targets=targets,
        modules=tuple(sorted(modules)),
        probes=probes,
        max_in_flight=max_in_flight,
        scrape_timeout_offset_s=offset,
        otlp_endpoint=otlp,
        otlp_resource=resource,
    )


def _otlp(
    path: Path, endpoint: str, environ: Mapping[str, str]
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The OTLP endpoint checked as --otlp-endpoint is, the SDK there to send to it, and
    the resource attributes from OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (a fleet's
    vantage=... goes there)."""
    from promptpath.outputs.otlp import (
        EXTRA,
        check_endpoint,
        otel_installed,
        parse_resource_attributes,
    )

    try:
        endpoint = check_endpoint(endpoint, "[exporter] otlp_endpoint")
    except UsageError as exc:
        raise _bad(path, exc.message) from None
    if not otel_installed():
        raise _bad(path, f"[exporter] otlp_endpoint needs the OpenTelemetry SDK: {EXTRA}")
    attrs = parse_resource_attributes(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    if environ.get("OTEL_SERVICE_NAME"):
        attrs["service.name"] = environ["OTEL_SERVICE_NAME"]
    return endpoint, tuple(attrs.items())


def _budget(path: Path, what: str, value: int) -> int:
    if value < 0:
        raise _bad(path, f"{what} daily_token_budget must be 0 (none) or more, got {value}")
    return int(value)


def _resolved(
    path: Path,
    target: str,
    module: str,
    target_table: Mapping[str, Any],
    module_table: Mapping[str, Any],
    environ: Mapping[str, str],
) -> Probe:
    from promptpath.plan.resolve import module_plan

    profile = {k: v for k, v in module_table.items() if k not in ("probes", "baseline")}
    for key in (*PATH_KEYS, "url"):
        if key in target_table:
            profile[key] = target_table[key]
    for file_key in ("cacert", "cert", "key"):
        if file_key in profile and not Path(profile[file_key]).is_absolute():
            profile[file_key] = str(path.parent / profile[file_key])
    try:
        plan = module_plan(profile, probes=list(module_table.get("probes", [])), environ=environ)
    except PromptpathError as exc:
        raise _bad(path, f"target {target!r} with module {module!r}: {exc.message}") from None
    baseline = _baseline(path, module, module_table.get("baseline"))
    return Probe(target=target, module=module, plan=plan, tokens=_spend(plan), baseline=baseline)


def _baseline(path: Path, module: str, given: str | None) -> Mapping[str, float | None] | None:
    """A module's ``baseline`` file (relative to the config's folder) read into the values
    the ratios divide by; any problem with it fails the load, naming the module."""
    if given is None:
        return None
    from promptpath.core.change.baseline import baseline_values
    from promptpath.plan.documents import load

    file = Path(given) if Path(given).is_absolute() else path.parent / given
    try:
        loaded = load(str(file), f"module {module!r} baseline")
    except UsageError as exc:
        raise _bad(path, exc.message) from None
    if not loaded.runs:
        raise _bad(path, f"module {module!r} baseline {file} holds no runs")
    return baseline_values(loaded.runs)


def _spend(plan: Plan) -> int:
    """The most one probe may spend in tokens: the trace's cap and each probe's own."""
    from promptpath.probes.base import ProbeContext

    tokens = plan.trace.max_tokens
    ctx = ProbeContext(options=plan.trace, result=None, settings=plan.probe_settings)
    for cls in plan.probes:
        try:
            tokens += cls().cost(ctx).tokens
        except Exception:  # a cost that needs the trace's result: count its cap once more
            tokens += plan.trace.max_tokens
    return tokens


__all__ = ["ExporterConfig", "Probe", "Target", "load"]

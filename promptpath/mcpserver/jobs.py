"""What each MCP tool does, for one client connection: allow-list, spend limit, run.

One ``Session`` per connection (stdio: the process). A call names a target; the name (or
the URL one of the config's targets has, exactly) is looked up in the allow-list, the
exporter's config (exporter/config.py): anything else is refused right there, before a
Plan exists, so no packet can leave for it. The allowed target's module table is resolved
with the call's options through the same code as `run PROFILE` (resolve.module_plan), so
a bad option is a usage error before any connection, as on the command line.

The spend limit is the exporter's cost guard (exporter/guard.py), keyed by (target,
module): each run is charged the most it may spend (its token cap plus each probe's
stated tokens) when it starts, against the connection's budget (``[mcp]
connection_token_budget``); a run that would go over is refused. A run is the exporter's
probe run (exporter/probe.py): the trace's own timeout, every probe inside a deadline of
the timeout plus the probes' stated seconds, and a stop signal cuts what is running.

Every result is a ``Reply``: the one-line verdict and the JSON document, which is the
``promptpath.run/1`` document `run --json` prints (redacted by structure: the key is
never in it) or, for a refusal, the short error object a usage error prints.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from promptpath.core.errors import PromptpathError, UsageError
from promptpath.core.textsafe import visible
from promptpath.core.urlsafe import shown_url
from promptpath.exporter.config import ExporterConfig, Probe, Target, spend
from promptpath.exporter.guard import Action, CostGuard
from promptpath.exporter.probe import Stop, run_probe
from promptpath.plan.plan import Plan

#: The guard's "day": one connection's budget never turns over.
_CONNECTION: Final = "connection"
#: The run's deadline past its stated seconds: the report is written after the last probe.
_DEADLINE_MARGIN_S: Final = 2.0
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A tool's answer: the verdict line, the JSON document, whether it is a refusal."""

    verdict: str
    document: dict[str, Any]
    refused: bool = False
    #: A run's stated cost (``Session.cost``) and its line: beside the document, never in it.
    cost: dict[str, Any] | None = None
    cost_line: str | None = None


def refusal(exc: PromptpathError) -> Reply:
    """A usage error as a reply: the line a terminal shows, and the object `--json` prints."""
    document = {
        "schema": "promptpath.run/1",
        "ok": False,
        "exit_code": int(exc.exit_code),
        "error": {"stage": exc.stage, "kind": exc.kind, "message": exc.message},
    }
    return Reply(verdict=f"promptpath: {visible(exc.message)}", document=document, refused=True)


def _url_key(url: str) -> tuple[str, str, int | None, str, str] | None:
    """What makes two URLs the same target: scheme, host, port (default filled), path
    (no trailing slash) and query; None for what is not an absolute http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or parts.username or parts.password:
        return None
    scheme = parts.scheme.lower()
    return (
        scheme,
        parts.hostname.lower().rstrip("."),
        port or _DEFAULT_PORTS.get(scheme),
        parts.path.rstrip("/") or "/",
        parts.query,
    )


def _key(probe: Probe) -> tuple[str, str]:
    """The guard's key: the budget is the connection's (the guard charges a key's first
    half), runs in flight are per (target, module)."""
    return (_CONNECTION, f"{probe.target}\x00{probe.module}")


class Session:
    """One client connection: the config it serves, its guard and its spend."""

    def __init__(
        self, config: ExporterConfig, environ: Mapping[str, str], stop: Stop | None = None
    ) -> None:
        self.config = config
        self.environ = environ
        self.stop = stop or Stop("promptpath mcp is stopping")
        self.guard: CostGuard[dict[str, Any]] = CostGuard(config.max_in_flight)
        self.budget = config.connection_token_budget

    # -- the allow-list ---------------------------------------------------------------------
    def target(self, given: str) -> Target:
        """The allowed target ``given`` names (its name, or its URL exactly), else a
        ``not_allowed`` refusal that quotes neither userinfo nor query."""
        found = self.config.targets.get(given)
        if found is not None:
            return found
        key = _url_key(given) if "://" in given else None
        if key is not None:
            for target in self.config.targets.values():
                if _url_key(target.url) == key:
                    return target
        shown = shown_url(given) if "://" in given else given
        raise UsageError(
            f"target {visible(shown[:200])!r} is not in the allow-list of {self.config.path}"
            f" (targets: {', '.join(sorted(self.config.targets))}): refused, nothing sent",
            kind="not_allowed",
        )

    def probe_of(self, target: Target, module: str | None) -> Probe:
        name = module or sorted(target.modules)[0]
        probe = self.config.probe(target.name, name)
        if probe is None:
            raise UsageError(
                f"target {target.name!r} may not be probed with module {name!r}"
                f" (its modules: {', '.join(sorted(target.modules))})",
                kind="not_allowed",
            )
        return probe

    def plan(self, probe: Probe, options: Mapping[str, Any], probes: list[str]) -> Plan:
        """The allowed pair's Plan with the call's options (usage errors as a run's)."""
        from promptpath.plan.resolve import module_plan

        return module_plan(probe.profile, probes=probes, environ=self.environ, given=options)

    # -- cost -------------------------------------------------------------------------------
    def spent(self) -> int:
        return self.guard.spent(_CONNECTION, _CONNECTION)

    def left(self) -> int | None:
        return self.guard.left(_CONNECTION, _CONNECTION, self.budget)

    def cost(self, plan: Plan) -> dict[str, Any]:
        """What the run may spend, stated before it runs: the trace's cap and each probe's
        own statement (requests, tokens, seconds), as `run --probe` prints them."""
        from promptpath.probes.base import ProbeContext

        ctx = ProbeContext(options=plan.trace, result=None, settings=plan.probe_settings)
        probes = []
        seconds = plan.trace.timeout
        for cls in plan.probes:
            try:
                stated = cls().cost(ctx)
            except Exception:  # a cost that needs the trace's result: charged its cap again
                probes.append({"probe": cls.name, "cost": "stated after the trace"})
                seconds += plan.trace.timeout
                continue
            probes.append({"probe": cls.name, "cost": stated.describe()})
            seconds += stated.seconds
        return {
            "tokens": spend(plan),
            "trace": f"1 request, ≤{plan.trace.max_tokens} tokens, ≤{plan.trace.timeout:g} s",
            "probes": probes,
            "seconds": round(seconds, 3),
            "connection_budget": self.budget or None,
            "spent_before": self.spent(),
        }

    def cost_line(self, target: str, cost: Mapping[str, Any]) -> str:
        parts = [f"trace {cost['trace']}"]
        parts += [f"{p['probe']} ({p['cost']})" for p in cost["probes"]]
        left = self.left()
        budget = "no spend limit" if left is None else f"{left} of {self.budget} tokens left"
        return f"cost of {target}: ≤{cost['tokens']} tokens: {'; '.join(parts)} ({budget})"

    # -- the tools --------------------------------------------------------------------------
    def list_profiles(self) -> Reply:
        targets = []
        for name, target in sorted(self.config.targets.items()):
            modules = []
            for module in sorted(target.modules):
                probe = self.config.probe(name, module)
                assert probe is not None
                trace = probe.plan.trace
                modules.append(
                    {
                        "name": module,
                        "provider": trace.provider,
                        "model": trace.model,
                        "probes": list(probe.probe_names),
                        "max_tokens": trace.max_tokens,
                        "timeout_s": trace.timeout,
                    }
                )
            targets.append({"name": name, "url": shown_url(target.url), "modules": modules})
        left = self.left()
        document = {
            "schema": "promptpath.mcp.profiles/1",
            "config": str(self.config.path),
            "connection_token_budget": self.budget or None,
            "spent": self.spent(),
            "left": left,
            "targets": targets,
        }
        names = ", ".join(sorted(self.config.targets))
        budget = "no spend limit" if left is None else f"{left} of {self.budget} tokens left"
        return Reply(verdict=f"{len(targets)} targets: {names} ({budget})", document=document)

    def prepare(
        self, arguments: Mapping[str, Any], probes: list[str]
    ) -> tuple[Probe, Plan, dict[str, Any]]:
        """The allowed pair, its Plan with the call's options, and the stated cost."""
        target = self.target(str(arguments["target"]))
        probe = self.probe_of(target, arguments.get("module"))
        options = {
            k: v for k, v in arguments.items() if k not in ("target", "module", "dry_run", "probe")
        }
        plan = self.plan(probe, options, probes)
        return probe, plan, self.cost(plan)

    def admit(self, probe: Probe, tokens: int) -> None:
        """Refuse a run the guard says no to (over the budget, at capacity, a run of the
        same pair in flight); else nothing."""
        decision = self.guard.decide(
            _key(probe),
            now=time.monotonic(),
            day=_CONNECTION,
            min_interval_s=0.0,
            budget=self.budget,
            cost=tokens,
        )
        if decision.action is Action.OVER_BUDGET:
            raise UsageError(
                f"spend limit: this run may spend ≤{tokens} tokens and the connection has"
                f" {self.left()} of its {self.budget} left ([mcp] connection_token_budget"
                f" of {self.config.path}): refused, nothing sent",
                kind="over_budget",
            )
        if decision.action is Action.OVER_CAPACITY:
            raise UsageError(
                f"{self.guard.in_flight} runs in flight, the most at once"
                f" ([exporter] max_in_flight): try again when one ends",
                kind="usage",
            )
        if decision.action is Action.JOIN:
            raise UsageError(
                f"a run of {probe.target} with module {probe.module} is in flight: wait"
                " for its answer",
                kind="usage",
            )

    async def run(self, probe: Probe, plan: Plan, cost: Mapping[str, Any]) -> Reply:
        """The run, charged to the connection; its report and verdict line."""
        key = _key(probe)
        tokens = int(cost["tokens"])
        ticket = self.guard.started(key, now=time.monotonic(), day=_CONNECTION, cost=tokens)
        try:
            outcome = await run_probe(
                plan, float(cost["seconds"]) + _DEADLINE_MARGIN_S, stop=self.stop
            )
        except BaseException:
            self.guard.abandoned(key, ticket=ticket)
            raise
        self.guard.finished(key, outcome.report, ticket=ticket)
        report = outcome.report
        verdict = str(report.get("headline") or ("OK" if outcome.success else "FAILED"))
        return Reply(verdict=visible(verdict), document=report)


__all__ = ["Reply", "Session", "refusal"]

"""The exporter's routes: /probe, /metrics, /-/reload, /-/healthy, /-/ready.

``GET /probe?target=NAME&module=MODULE`` probes only a target its config names: a name
it does not know, or a URL, is answered 400 before anything else happens (no lookup, no
connection: an exporter that probes what it is handed is an open relay spending the
operator's money). The cost guard (guard.py) then decides whether the probe runs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime

import anyio
import anyio.abc
import anyio.to_thread

from promptpath import __version__
from promptpath.core.errors import PromptpathError
from promptpath.core.textsafe import visible
from promptpath.exporter.config import ExporterConfig, Probe, load
from promptpath.exporter.guard import Action, CostGuard, Key
from promptpath.exporter.http import Request, Response, text
from promptpath.exporter.log import JsonLog
from promptpath.exporter.metrics import GuardState, Health, Served, health_text, probe_text
from promptpath.exporter.probe import Outcome, run_probe
from promptpath.outputs.otlp import OtlpPlan

PROM_TEXT = "text/plain; version=0.0.4; charset=utf-8"
SCRAPE_TIMEOUT_HEADER = "x-prometheus-scrape-timeout-seconds"
#: The shortest deadline a probe gets, whatever the scrape timeout says.
MIN_DEADLINE_S = 0.1
#: OTLP exports sent at once, and how many more may wait: past that one is dropped
#: (counted), so a collector that hangs costs bounded threads and memory, never a scrape.
OTLP_SENDING = 2
OTLP_WAITING = 16
_PATHS = ("/probe", "/metrics", "/-/reload", "/-/healthy", "/-/ready", "/")


def _utc_day() -> str:
    return datetime.now(UTC).date().isoformat()


def _shown(value: str) -> str:
    """A query value quoted back in an answer: escaped, and short."""
    return visible(value[:80]) + ("…" if len(value) > 80 else "")


class Exporter:
    def __init__(self, config: ExporterConfig, *, environ: Mapping[str, str], log: JsonLog):
        self.config = config
        self.environ = environ
        self.log = log
        self.guard: CostGuard[Outcome] = CostGuard(config.max_in_flight)
        self.health = Health(last_reload_success_unix=time.time())
        self.draining = False
        self._done: dict[Key, anyio.Event] = {}
        #: Where side work runs (the OTLP exports): run.py's task group, once serving.
        self.background: anyio.abc.TaskGroup | None = None
        self._exports = anyio.CapacityLimiter(OTLP_SENDING)
        self._exports_waiting = 0

    # -- routes ---------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        path = request.path if request.path in _PATHS else "other"
        self.health.scrapes[path] += 1
        if path == "/probe" and request.method in ("GET", "HEAD"):
            return await self.probe(request)
        if path == "/metrics" and request.method in ("GET", "HEAD"):
            return Response(status=200, body=self.metrics().encode(), content_type=PROM_TEXT)
        if path == "/-/reload" and request.method in ("POST", "PUT"):
            ok, message = self.reload("POST /-/reload")
            return text(200 if ok else 500, message)
        if path == "/-/healthy":
            return text(200, "OK")
        if path == "/-/ready":
            return text(503, "draining") if self.draining else text(200, "OK")
        if path == "/" and request.method in ("GET", "HEAD"):
            return text(200, self._index())
        if path in _PATHS:
            return text(405, f"{request.method} is not allowed on {path}")
        return text(404, "not found: /probe?target=NAME&module=MODULE, /metrics, /-/reload")

    def _index(self) -> str:
        lines = [f"promptpath exporter {__version__}", "", "targets (module...):"]
        for name, target in sorted(self.config.targets.items()):
            lines.append(f"  {name}  ({', '.join(sorted(target.modules))})")
        lines += ["", "GET /probe?target=NAME&module=MODULE   GET /metrics   POST /-/reload"]
        return "\n".join(lines)

    def metrics(self) -> str:
        from promptpath.exporter.process import process_state

        day = _utc_day()
        budgets = {
            name: (t.daily_token_budget, self.guard.left(name, day, t.daily_token_budget) or 0)
            for name, t in self.config.targets.items()
            if t.daily_token_budget
        }
        guard = GuardState(
            in_flight=self.guard.in_flight,
            max_in_flight=self.guard.max_in_flight,
            budgets=budgets,
        )
        return health_text(
            self.health,
            guard,
            process_state(),
            version=__version__,
            pairs=sorted(self.config.probes),
        )

    def _refuse(self, status: int, reason: str, message: str, **fields: str) -> Response:
        self.health.refused[reason] += 1
        self.log("refused", reason=reason, message=message, **fields)
        return text(status, message)

    # -- /probe ---------------------------------------------------------------------------
    async def probe(self, request: Request) -> Response:
        target_name = (request.query.get("target") or [""])[-1]
        module_name = (request.query.get("module") or [""])[-1]
        config = self.config
        if not target_name:
            return self._refuse(400, "bad_request", "the target parameter is missing")
        if "://" in target_name or "/" in target_name:
            return self._refuse(
                400,
                "url_target",
                f"target {_shown(target_name)!r} looks like a URL: this exporter probes only"
                " the targets its config names",
            )
        target = config.targets.get(target_name)
        if target is None:
            return self._refuse(
                400,
                "unknown_target",
                f"unknown target {_shown(target_name)!r}: not in the config's [targets]",
            )
        if not module_name and len(target.modules) == 1:
            (module_name,) = target.modules
        if not module_name:
            return self._refuse(400, "bad_request", "the module parameter is missing")
        if module_name not in config.modules:
            return self._refuse(400, "unknown_module", f"unknown module {_shown(module_name)!r}")
        probe = config.probe(target_name, module_name)
        if probe is None:
            return self._refuse(
                400,
                "module_not_allowed",
                f"target {target_name!r} does not allow module {module_name!r}",
            )
        if self.draining:
            return self._refuse(503, "draining", "the exporter is shutting down")
        return await self._guarded(probe, self._deadline(request, probe))

    def _deadline(self, request: Request, probe: Probe) -> float:
        """The module's timeout, within the scrape's own (less the offset)."""
        deadline = probe.plan.trace.timeout
        given = request.headers.get(SCRAPE_TIMEOUT_HEADER)
        if given is not None:
            try:
                scrape = float(given)
            except ValueError:
                scrape = float("nan")
            if scrape > 0:  # NaN and nonsense: not a deadline
                deadline = min(deadline, scrape - self.config.scrape_timeout_offset_s)
        return max(MIN_DEADLINE_S, deadline)

    async def _guarded(self, probe: Probe, deadline_s: float) -> Response:
        key: Key = (probe.target, probe.module)
        target = self.config.targets[probe.target]
        day = _utc_day()
        decision = self.guard.decide(
            key,
            now=time.monotonic(),
            day=day,
            min_interval_s=target.min_interval_s,
            budget=target.daily_token_budget,
            cost=probe.tokens,
        )
        if decision.action is Action.JOIN:
            with anyio.move_on_after(deadline_s):
                await self._done[key].wait()
            last = self.guard.last(key)
            if last is None:
                return self._refuse(
                    503, "still_running", "a probe of this target and module is still running"
                )
            return self._cached(key, last)
        if decision.action is Action.CACHED:
            last = self.guard.last(key)
            assert last is not None
            return self._cached(key, last)
        if decision.action is Action.OVER_CAPACITY:
            return self._refuse(
                503,
                "over_capacity",
                f"{self.guard.in_flight} probes in flight (max_in_flight"
                f" {self.guard.max_in_flight}): try again later",
                target=probe.target,
                module=probe.module,
            )
        if decision.action is Action.OVER_BUDGET:
            return self._refuse(
                429,
                "over_budget",
                f"target {probe.target!r} has spent its daily token budget"
                f" ({target.daily_token_budget}; a probe costs up to {probe.tokens})",
                target=probe.target,
                module=probe.module,
            )
        return await self._run(key, probe, deadline_s, day)

    def _cached(self, key: Key, outcome: Outcome) -> Response:
        self.health.cache_hits[(key[1], key[0])] += 1
        age = self.guard.age(key, now=time.monotonic()) or 0.0
        served = Served(outcome=outcome, cached=True, age_s=age)
        return Response(status=200, body=probe_text(served).encode(), content_type=PROM_TEXT)

    async def _run(self, key: Key, probe: Probe, deadline_s: float, day: str) -> Response:
        started = time.monotonic()
        self.guard.started(key, now=started, day=day, cost=probe.tokens)
        done = self._done[key] = anyio.Event()
        finished = False
        try:
            outcome = await run_probe(probe.plan, deadline_s)
            self.guard.finished(key, outcome, started=started)
            finished = True
        finally:
            if not finished:
                self.guard.abandoned(key)
            done.set()
        self.health.probed(probe.module, probe.target, outcome)
        self._log_probe(probe, outcome)
        if self.background is not None and self._otlp_plan(probe) is not None:
            self.background.start_soon(self._export, probe, outcome.report)
        served = Served(outcome=outcome, cached=False, age_s=time.monotonic() - started)
        return Response(status=200, body=probe_text(served).encode(), content_type=PROM_TEXT)

    def _log_probe(self, probe: Probe, outcome: Outcome) -> None:
        report = outcome.report
        error = report.get("error") or {}
        ttft = (report.get("ttft_ms") or {}).get("from_start")
        self.log(
            "probe",
            target=probe.target,
            module=probe.module,
            url=(report.get("target") or {}).get("url"),
            result=outcome.result,
            exit_code=outcome.exit_code,
            duration_s=round(outcome.duration_s, 4),
            deadline_s=outcome.deadline_s,
            stage=outcome.failed_stage,
            timed_out_in=outcome.timed_out_in,
            # Scrubbed of the run's secrets (reporting.scrub_result) before it got here.
            message=error.get("message"),
            ttft_s=None if ttft is None else round(ttft / 1000, 6),
            findings=[
                {"probe": f.get("probe"), "verdict": f.get("verdict")}
                for f in report.get("findings") or []
            ],
        )

    def _otlp_plan(self, probe: Probe) -> OtlpPlan | None:
        """Where a fresh probe's telemetry goes: the config's ``otlp_endpoint``, else the
        OTEL_EXPORTER_OTLP_* variables (the probe's Plan read them as `run` does); the
        resource names the target and module either way."""
        from dataclasses import replace

        from promptpath.outputs.otlp import send_plan

        endpoint = self.config.otlp_endpoint
        plan = probe.plan.outputs.otlp
        if endpoint is not None:
            plan = send_plan(endpoint, resource=dict(self.config.otlp_resource))
        if plan is None:
            return None
        extra = (
            ("promptpath.exporter.target", probe.target),
            ("promptpath.exporter.module", probe.module),
        )
        return replace(plan, resource=(*plan.resource, *extra))

    async def _export(self, probe: Probe, report: dict[str, object]) -> None:
        """A fresh probe's spans and metrics to the collector (promptpath.outputs.otlp), in a
        thread: the SDK blocks, up to its own timeout."""
        plan = self._otlp_plan(probe)
        if plan is None:
            return
        if self._exports_waiting >= OTLP_WAITING:
            self.health.otlp["dropped"] += 1
            return
        from promptpath.outputs.otlp import send_otlp

        self._exports_waiting += 1
        try:
            sent = await anyio.to_thread.run_sync(
                send_otlp, report, plan, abandon_on_cancel=True, limiter=self._exports
            )
        finally:
            self._exports_waiting -= 1
        self.health.otlp["exported" if sent.exported else "failed"] += 1
        if not sent.exported:
            self.log("otlp", ok=False, target=probe.target, module=probe.module, error=sent.error)

    # -- reload ---------------------------------------------------------------------------
    def reload(self, why: str) -> tuple[bool, str]:
        """Load the config again; on any problem keep the one in use and say why."""
        try:
            new = load(self.config.path, self.environ)
        except PromptpathError as exc:
            problem = exc.message
        except Exception as exc:  # a bug of ours: the old config keeps serving
            problem = f"internal error: {type(exc).__name__}: {exc}"
        else:
            self.config = new
            self.guard.max_in_flight = new.max_in_flight
            self.guard.forget(set(new.probes))
            self.health.reloads["success"] += 1
            self.health.last_reload_ok = True
            self.health.last_reload_success_unix = time.time()
            self.log("reload", ok=True, trigger=why, targets=len(new.targets))
            return True, f"reloaded {new.path}: {len(new.targets)} targets"
        self.health.reloads["failure"] += 1
        self.health.last_reload_ok = False
        self.log("reload", ok=False, trigger=why, error=problem)
        return False, f"reload failed, the previous config stays in use: {problem}"


__all__ = ["Exporter"]

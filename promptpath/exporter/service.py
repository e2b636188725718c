"""The exporter's routes: /probe, /metrics, /-/reload, /-/healthy, /-/ready.

``GET /probe?target=NAME&module=MODULE`` probes only a target its config names: a name
it does not know, or a URL, is answered 400 before anything else happens (no lookup, no
connection: an exporter that probes what it is handed is an open relay spending the
operator's money). The cost guard (guard.py) then decides whether the probe runs.

Prometheus is no browser: a request a web page made (an ``Origin`` header, or a browser's
``Sec-Fetch-Site`` naming another site) and, when ``--listen`` names the host, one whose
``Host`` is another name (a DNS-rebinding page) are refused 403 before any route, so a page
of another origin can neither spend probes nor reload the config. ``POST /-/reload`` answers
only with ``--web.enable-lifecycle``, as Prometheus' own; SIGHUP reloads either way.
"""

from __future__ import annotations

import ipaddress
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import anyio.abc
import anyio.to_thread

from promptpath import __version__
from promptpath.core.errors import PromptpathError
from promptpath.core.textsafe import visible
from promptpath.exporter.config import ExporterConfig, Probe, load
from promptpath.exporter.guard import Action, CostGuard, Key
from promptpath.exporter.http import MAX_CONNECTIONS, ConnectionStats, Request, Response, text
from promptpath.exporter.log import JsonLog
from promptpath.exporter.metrics import GuardState, Health, Served, health_text, probe_text
from promptpath.exporter.probe import Outcome, Stop, run_probe
from promptpath.outputs.otlp import OtlpPlan

PROM_TEXT = "text/plain; version=0.0.4; charset=utf-8"
SCRAPE_TIMEOUT_HEADER = "x-prometheus-scrape-timeout-seconds"
#: The shortest deadline a probe gets, whatever the scrape timeout says.
MIN_DEADLINE_S = 0.1
#: OTLP exports sent at once, and how many more may wait: past that one is dropped
#: (counted), so a collector that hangs costs bounded threads and memory, never a scrape.
OTLP_SENDING = 2
OTLP_WAITING = 16
#: Scrapes of /probe answered at once (running a probe, or waiting for one): past it a
#: scrape is refused 503 at once, so the connections left always answer /metrics and
#: /-/ready even while every probe slot and every waiting scrape is taken.
MAX_PROBE_SCRAPES = MAX_CONNECTIONS * 3 // 4
_PATHS = ("/probe", "/metrics", "/-/reload", "/-/healthy", "/-/ready", "/")
#: A browser's Sec-Fetch-Site for a request another site's page made.
_OTHER_SITE = ("cross-site", "same-site")


def listen_name(host: str) -> str | None:
    """The name ``--listen`` gave, which Host must then carry (None: an address, or every
    interface, and Host is not checked)."""
    if not host:
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.rstrip(".").lower()
    return None


def _host_name(value: str) -> str:
    """The host of a Host header: no port, no brackets, lower case, no trailing dot."""
    value = value.strip()
    if value.startswith("["):
        return value[1:].split("]", 1)[0].lower()
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".").lower()


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(slots=True, eq=False)
class _Running:
    """A probe running for a pair: the scrapes that join it wait for ``done``."""

    started: float
    done: anyio.Event
    outcome: Outcome | None = None


def _utc_day() -> str:
    return datetime.now(UTC).date().isoformat()


def _shown(value: str) -> str:
    """A query value quoted back in an answer: escaped, and short."""
    return visible(value[:80]) + ("…" if len(value) > 80 else "")


class Exporter:
    def __init__(
        self,
        config: ExporterConfig,
        *,
        environ: Mapping[str, str],
        log: JsonLog,
        lifecycle: bool = False,
        host: str | None = None,
    ):
        self.config = config
        self.environ = environ
        self.log = log
        #: --web.enable-lifecycle: POST /-/reload answers (else 403).
        self.lifecycle = lifecycle
        #: --listen's name, which every request's Host must carry (None: not checked).
        self.host = host
        self.guard: CostGuard[Outcome] = CostGuard(config.max_in_flight)
        self.health = Health(last_reload_success_unix=time.time())
        #: The HTTP server's connection counts (run.py hands them over once listening).
        self.connections: ConnectionStats | None = None
        self.draining = False
        #: Cuts the probes still running when the drain runs out (run.py).
        self.stop = Stop()
        self._running: dict[Key, _Running] = {}
        self._probe_scrapes = 0
        # Reloads run one at a time, off the event loop; one asked for while another runs
        # waits for the next, which every request waiting then shares.
        self._reload_lock = anyio.Lock()
        self._reloads_asked = 0
        self._reloads_done = 0
        self._reload_answer: tuple[bool, str] = (True, "")
        #: Where side work runs (the OTLP exports): run.py's task group, once serving.
        self.background: anyio.abc.TaskGroup | None = None
        self._exports = anyio.CapacityLimiter(OTLP_SENDING)
        self._exports_waiting = 0

    # -- routes ---------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        path = request.path if request.path in _PATHS else "other"
        self.health.scrapes[path] += 1
        refused = self._browser_shaped(request)
        if refused is not None:
            return refused
        if path == "/probe" and request.method in ("GET", "HEAD"):
            if self._probe_scrapes >= MAX_PROBE_SCRAPES:
                return self._refuse(
                    503,
                    "too_many_scrapes",
                    f"{self._probe_scrapes} scrapes of /probe are being answered: try again later",
                )
            self._probe_scrapes += 1
            try:
                return await self.probe(request)
            finally:
                self._probe_scrapes -= 1
        if path == "/metrics" and request.method in ("GET", "HEAD"):
            return Response(status=200, body=self.metrics().encode(), content_type=PROM_TEXT)
        if path == "/-/reload" and request.method in ("POST", "PUT"):
            if not self.lifecycle:
                return text(
                    403,
                    "the lifecycle API is not enabled: start the exporter with"
                    " --web.enable-lifecycle, or send it SIGHUP",
                )
            ok, message = await self.reload("POST /-/reload")
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

    def _browser_shaped(self, request: Request) -> Response | None:
        """403 for a request a web page made, or one whose Host is not --listen's name."""
        headers = request.headers
        site = headers.get("sec-fetch-site", "").strip().lower()
        if "origin" in headers or site in _OTHER_SITE:
            return self._refuse(
                403,
                "cross_origin",
                "refused: a web page made this request (an Origin or Sec-Fetch-Site header);"
                " the exporter answers Prometheus, not browsers",
            )
        if self.host is not None and "host" in headers:
            name = _host_name(headers["host"])
            if name != self.host and not _is_address(name):
                return self._refuse(
                    403,
                    "wrong_host",
                    f"refused: Host {_shown(headers['host'])!r} is not {self.host!r}, the name"
                    " --listen gave",
                )
        return None

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
            connections=self.connections,
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
            running = self._running[key]
            with anyio.move_on_after(deadline_s):
                await running.done.wait()
            if running.outcome is None:
                return self._refuse(
                    503, "still_running", "a probe of this target and module is still running"
                )
            if running.outcome.cut_by is not None:
                return self._cut(running.outcome)
            return self._cached(
                key,
                running.outcome,
                age_s=time.monotonic() - running.started,
                baseline=probe.baseline,
            )
        if decision.action is Action.CACHED:
            last = self.guard.last(key)
            assert last is not None
            return self._cached(key, last, age_s=decision.age_s or 0.0, baseline=probe.baseline)
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

    def _cached(
        self,
        key: Key,
        outcome: Outcome,
        *,
        age_s: float,
        baseline: Mapping[str, float | None] | None = None,
    ) -> Response:
        self.health.cache_hits[(key[1], key[0])] += 1
        served = Served(outcome=outcome, cached=True, age_s=age_s, baseline=baseline)
        return Response(status=200, body=probe_text(served).encode(), content_type=PROM_TEXT)

    def _cut(self, outcome: Outcome) -> Response:
        """The answer to a scrape whose probe the drain cut: 503, naming where."""
        return text(
            503,
            f"the exporter is shutting down ({outcome.cut_by}): its drain ran out and cut the"
            f" probe in stage {outcome.timed_out_in!r} after {outcome.duration_s:.1f} s",
        )

    async def _run(self, key: Key, probe: Probe, deadline_s: float, day: str) -> Response:
        started = time.monotonic()
        ticket = self.guard.started(key, now=started, day=day, cost=probe.tokens)
        running = self._running[key] = _Running(started=started, done=anyio.Event())
        finished = False
        try:
            outcome = await run_probe(probe.plan, deadline_s, stop=self.stop)
            # A reload meanwhile may have dropped the pair: then the result is not kept.
            self.guard.finished(key, outcome, ticket=ticket)
            running.outcome = outcome
            finished = True
        finally:
            if not finished:
                self.guard.abandoned(key, ticket=ticket)
            if self._running.get(key) is running:
                del self._running[key]
            running.done.set()
        self.health.probed(probe.module, probe.target, outcome)
        self._log_probe(probe, outcome)
        if outcome.cut_by is not None:
            return self._cut(outcome)
        if self.background is not None and self._otlp_plan(probe) is not None:
            self.background.start_soon(self._export, probe, outcome.report)
        served = Served(
            outcome=outcome,
            cached=False,
            age_s=time.monotonic() - started,
            baseline=probe.baseline,
        )
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
            cut_by=outcome.cut_by,
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
    async def reload(self, why: str) -> tuple[bool, str]:
        """Load the config again; on any problem keep the one in use and say why.

        The file is read and every pair resolved in a worker thread (a config of thousands
        of targets takes a fifth of a second): the scrapes go on meanwhile. Reloads run one
        at a time; a request that arrives while one runs waits for the next one, which
        reads the file after it asked, and shares its answer with every request waiting."""
        self._reloads_asked += 1
        ticket = self._reloads_asked
        async with self._reload_lock:
            if self._reloads_done >= ticket:
                return self._reload_answer  # a reload begun after this request asked ran
            covers = self._reloads_asked
            answer = await self._reload_now(why)
            self._reloads_done = covers
            self._reload_answer = answer
            return answer

    async def _reload_now(self, why: str) -> tuple[bool, str]:
        try:
            new = await anyio.to_thread.run_sync(load, self.config.path, self.environ)
        except PromptpathError as exc:
            problem = exc.message
        except Exception as exc:  # a bug of ours: the old config keeps serving
            problem = f"internal error: {type(exc).__name__}: {exc}"
        else:
            old = self.config
            self.config = new
            self.guard.max_in_flight = new.max_in_flight
            # A pair whose plan changed (its URL, or any key of its target or module) is a
            # new pair: its cached result is about the old one.
            self.guard.forget(
                {key for key, probe in new.probes.items() if old.probes.get(key) == probe}
            )
            self.health.reloads["success"] += 1
            self.health.last_reload_ok = True
            self.health.last_reload_success_unix = time.time()
            self.log("reload", ok=True, trigger=why, targets=len(new.targets))
            return True, f"reloaded {new.path}: {len(new.targets)} targets"
        self.health.reloads["failure"] += 1
        self.health.last_reload_ok = False
        self.log("reload", ok=False, trigger=why, error=problem)
        return False, f"reload failed, the previous config stays in use: {problem}"

    # -- stop -----------------------------------------------------------------------------
    def cut(self, signum: signal.Signals) -> int:
        """The drain ran out: cut the probes still running (each scrape waiting for one is
        answered 503 naming the stage); how many there were."""
        return self.stop.cut(signum)


__all__ = ["MAX_PROBE_SCRAPES", "Exporter", "listen_name"]

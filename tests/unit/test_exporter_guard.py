"""The exporter's cost guard, sans-IO: minimum interval, probes in flight, daily budget."""

from __future__ import annotations

from promptpath.exporter.guard import Action, CostGuard

KEY = ("prod", "chat")


def _decide(guard: CostGuard[str], key: tuple[str, str] = KEY, **over: object) -> Action:
    given: dict[str, object] = {
        "now": 100.0,
        "day": "2026-12-01",
        "min_interval_s": 60.0,
        "budget": 0,
        "cost": 16,
    }
    given.update(over)
    return guard.decide(key, **given).action  # type: ignore[arg-type]


def test_a_scrape_sooner_than_the_interval_gets_the_last_result_later_ones_run() -> None:
    guard: CostGuard[str] = CostGuard(max_in_flight=4)
    assert _decide(guard) is Action.RUN
    ticket = guard.started(KEY, now=100.0, day="d", cost=16)
    assert _decide(guard, now=101.0) is Action.JOIN  # running: wait for it, never twice
    assert guard.finished(KEY, "result", ticket=ticket)
    decision = guard.decide(KEY, now=159.0, day="d", min_interval_s=60.0, budget=0, cost=16)
    assert decision.action is Action.CACHED and decision.age_s == 59.0
    assert guard.last(KEY) == "result"
    # The interval counts from when the last probe began, not when it ended.
    assert _decide(guard, now=160.0) is Action.RUN
    # Another pair has its own interval.
    assert _decide(guard, key=("prod", "path"), now=101.0) is Action.RUN


def test_the_cap_on_probes_in_flight_counts_every_target() -> None:
    guard: CostGuard[str] = CostGuard(max_in_flight=2)
    ticket = guard.started(("a", "chat"), now=0.0, day="d", cost=1)
    guard.started(("b", "chat"), now=0.0, day="d", cost=1)
    assert _decide(guard, key=("c", "chat")) is Action.OVER_CAPACITY
    guard.finished(("a", "chat"), "r", ticket=ticket)
    assert guard.in_flight == 1
    assert _decide(guard, key=("c", "chat")) is Action.RUN


def test_the_daily_budget_charges_each_probe_its_most_and_turns_with_the_day() -> None:
    guard: CostGuard[str] = CostGuard(max_in_flight=4)
    for i in range(3):
        assert _decide(guard, now=i * 100.0, day="d1", budget=50, cost=16) is Action.RUN
        ticket = guard.started(KEY, now=i * 100.0, day="d1", cost=16)
        guard.finished(KEY, "r", ticket=ticket)
    assert guard.left("prod", "d1", 50) == 2
    # A fourth would reach 64 > 50; another target's budget is its own.
    assert _decide(guard, now=400.0, day="d1", budget=50) is Action.OVER_BUDGET
    assert _decide(guard, key=("other", "chat"), day="d1", budget=50) is Action.RUN
    # A cached answer costs nothing, so it is served even with the budget spent.
    assert _decide(guard, now=250.0, day="d1", budget=50) is Action.CACHED
    assert _decide(guard, now=400.0, day="d2", budget=50) is Action.RUN
    assert guard.left("prod", "d2", 50) == 50
    assert guard.left("prod", "d2", 0) is None  # no budget


def test_an_abandoned_probe_frees_its_slot_and_the_next_scrape_runs_one() -> None:
    guard: CostGuard[str] = CostGuard(max_in_flight=1)
    ticket = guard.started(KEY, now=0.0, day="d", cost=1)
    guard.abandoned(KEY, ticket=ticket)
    assert guard.in_flight == 0
    assert _decide(guard, now=1.0) is Action.RUN


def test_forget_drops_the_pairs_a_reload_removed_or_changed_a_running_one_included() -> None:
    guard: CostGuard[str] = CostGuard(max_in_flight=4)
    ticket_a = guard.started(("a", "m"), now=0.0, day="d", cost=1)
    guard.finished(("a", "m"), "r", ticket=ticket_a)
    kept = guard.started(("k", "m"), now=0.0, day="d", cost=1)
    guard.finished(("k", "m"), "r", ticket=kept)
    old = guard.started(("b", "m"), now=0.0, day="d", cost=1)
    guard.forget({("k", "m")})
    assert guard.last(("a", "m")) is None
    assert guard.last(("k", "m")) == "r"
    # The running probe of a dropped pair still counts in flight, but the next scrape runs
    # a probe of the new config instead of joining it...
    assert guard.in_flight == 1
    assert _decide(guard, key=("b", "m"), now=1.0, min_interval_s=60.0) is Action.RUN
    new = guard.started(("b", "m"), now=1.0, day="d", cost=1)
    # ...and when the old one ends, its result is not kept: not even over the new one's.
    assert guard.finished(("b", "m"), "old config", ticket=old) is False
    assert guard.in_flight == 1
    assert _decide(guard, key=("b", "m"), now=2.0) is Action.JOIN
    assert guard.finished(("b", "m"), "new config", ticket=new) is True
    assert guard.last(("b", "m")) == "new config"

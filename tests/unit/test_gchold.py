"""The console script holds the cyclic collector off while it starts (promptpath/cli/gchold.py)
and gives it back once a command's options are parsed: a series or an exporter that runs
for hours must still collect."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from promptpath.cli import gchold
from tests.helpers.cli import run_cli


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


def test_the_collector_is_off_from_hold_and_back_with_the_start_up_frozen_at_release(
    collector: None,
) -> None:
    gc.enable()
    gchold.hold()
    assert not gc.isenabled()
    gchold.release()
    assert gc.isenabled() and gc.get_freeze_count() > 0
    gc.unfreeze()
    gchold.release()  # a second release: nothing held, nothing frozen again
    assert gc.get_freeze_count() == 0


def test_a_collector_the_caller_turned_off_stays_off(collector: None) -> None:
    gc.disable()
    gchold.hold()
    gchold.release()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


def test_a_dispatched_command_gives_the_collector_back(collector: None) -> None:
    gc.enable()
    gchold.hold()
    res = run_cli("run", "ftp://x/y")  # parsed, dispatched, refused by resolve()
    assert res.exit_code == 2
    assert gc.isenabled()


def test_a_trace_holds_the_collector_off_without_a_full_collection_and_gives_it_back(
    collector: None,
) -> None:
    from promptpath.tracer.session import gc_held

    gc.enable()
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with gc_held():
            assert not gc.isenabled() and gc.get_freeze_count() > 0
            assert collections == []  # frozen, not collected: no 10-14 ms before t0
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.callbacks.remove(count)

"""benchmarks/startup_phases.py stamps functions of the run path by name: each must still be
where it looks (the top-floor refactor moved two and `bench_startup.py --phases` broke),
and every span bench_startup prints must be made of stamps it writes."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_stamped_function_is_where_startup_phases_looks() -> None:
    phases = _load("startup_phases")
    for module_name, attr, _label in phases.STAMPED:
        target = getattr(importlib.import_module(module_name), attr)
        if inspect.ismodule(target):
            target = target.run
        assert callable(target), (module_name, attr)


def test_every_span_bench_startup_prints_is_made_of_stamps_it_gets() -> None:
    phases = _load("startup_phases")
    bench = _load("bench_startup")
    written = {
        *("spawn", "interpreter_up", "stamps_installed", "returned", "exit", "reaped"),
        *("t0", "end", "closed"),  # from the trace's timeline
        *(f"{label}.{side}" for _, _, label in phases.STAMPED for side in ("in", "out")),
    }
    for label, start, end in bench.PHASES:
        assert {start, end} <= written, label

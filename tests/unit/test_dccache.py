"""The dataclass method cache (promptpath/cli/dccache.py): a second process compiles nothing,
and the classes it makes behave exactly as the standard library's own.

Each case runs in a process of its own: ``install`` changes the dataclasses module for the
whole process, which the rest of the suite must not see."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from promptpath.cli import dccache

pytestmark = pytest.mark.unit

#: Classes of every kind promptpath defines, and what each does, printed line by line.
BEHAVIOUR = textwrap.dedent(
    """
    import dataclasses
    from dataclasses import dataclass, field

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Frozen:
        a: int
        b: tuple[str, ...] = ()
        c: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    @dataclass(slots=True)
    class Plain:
        x: float
        y: list[int] = field(default_factory=list)

    f, g = Frozen(a=1, b=("x",)), Frozen(a=1, b=("x",), c={"k": 2})
    print(repr(f), f == g, hash(f) == hash(g), Frozen(a=2) == f)
    try:
        f.a = 3
    except dataclasses.FrozenInstanceError as exc:
        print("frozen:", type(exc).__name__, exc)
    try:
        del f.a
    except dataclasses.FrozenInstanceError as exc:
        print("frozen del:", exc)
    p = Plain(1.5)
    p.y.append(4)
    print(repr(p), p == Plain(1.5, [4]), Plain.__hash__ is None, Plain.__match_args__)
    try:
        Frozen(1)
    except TypeError as exc:
        print("kw_only:", exc)
    """
)


#: Some runners export PYTHONDONTWRITEBYTECODE, which (as for .pyc files) writes no cache.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(code: str, *flags: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, *flags, "-c", code], capture_output=True, text=True, timeout=60, env=ENV
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def _with_cache(path: Path, *flags: str) -> tuple[int, list[str]]:
    """BEHAVIOUR with the cache at ``path``: what it compiled, and what it printed."""
    code = (
        f"from pathlib import Path\nfrom promptpath.cli import dccache\n"
        f"dccache.install(Path({str(path)!r}))\n{BEHAVIOUR}\n"
        "print('compiled', dccache.compiled())\ndccache.save()\n"
    )
    lines = _run(code, *flags)
    return int(lines[-1].split()[1]), lines[:-1]


def test_a_second_process_compiles_nothing_and_its_classes_behave_as_the_stdlibs(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "methods.marshal"
    plain = _run(BEHAVIOUR)
    first, first_out = _with_cache(cache)
    assert first > 0 and cache.is_file()
    second, second_out = _with_cache(cache)
    assert second == 0
    assert first_out == plain and second_out == plain
    assert any(line.startswith("frozen: FrozenInstanceError") for line in plain)


def test_a_cache_that_cannot_be_read_is_ignored_and_written_anew(tmp_path: Path) -> None:
    cache = tmp_path / "methods.marshal"
    cache.write_bytes(b"\x00not marshal at all")
    compiled, out = _with_cache(cache)
    assert compiled > 0 and out == _run(BEHAVIOUR)
    assert _with_cache(cache)[0] == 0  # rewritten, now whole


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path: Path) -> None:
    cache = tmp_path / "methods.marshal"
    compiled, _ = _with_cache(cache, "-B")  # sys.dont_write_bytecode, as PYTHONDONTWRITEBYTECODE
    assert compiled > 0 and not cache.exists()


def test_an_unwritable_place_is_no_error(tmp_path: Path) -> None:
    cache = tmp_path / "file-not-dir" / "methods.marshal"
    (tmp_path / "file-not-dir").write_text("")  # the cache's directory is a file
    compiled, out = _with_cache(cache)
    assert compiled > 0 and out == _run(BEHAVIOUR)


def test_the_cache_keeps_no_more_than_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dccache, "_codes", {})
    monkeypatch.setattr(dccache, "_new", 0)
    monkeypatch.setattr(dccache, "MAX_ENTRIES", 2)
    spaces: list[dict[str, object]] = []
    for n in range(3):
        ns: dict[str, object] = {}
        dccache._exec(f"value = {n}", {}, ns)
        spaces.append(ns)
    assert [ns["value"] for ns in spaces] == [0, 1, 2]  # every text ran
    assert len(dccache._codes) == 2 and dccache.compiled() == 2

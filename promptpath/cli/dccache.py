"""The methods ``dataclasses`` writes, compiled once per installation rather than per run.

For every dataclass it makes, the standard library writes the source of ``__init__``,
``__repr__``, ``__eq__`` and, for a frozen one, ``__hash__``, ``__setattr__`` and
``__delattr__``, and compiles it with ``exec``: ~60 µs a method, ~0.4 ms a class. Python
caches the bytecode of modules (``.pyc``) but not this, so the ~120 dataclasses a plain
``run`` defines (ours, h11's, h2's, anyio's) recompile ~600 methods in every process:
~40 ms of a ~200 ms start-up (``benchmarks/bench_startup.py``).

``install`` points the ``exec`` that the dataclasses module calls (a name it looks up in
its own globals before the builtins) at one that keeps the code object compiled from each
source text. The key is the whole text, so a cached object is exactly what compiling it
again would give; a text not seen before is compiled and kept. ``save`` writes what is
new beside promptpath's own bytecode (``__pycache__``, marshal, tagged with the
interpreter's cache tag), atomically, where Python itself would write ``.pyc`` files:
never when ``sys.dont_write_bytecode`` is set, and silently not where the directory is
not writable. A cache that cannot be read is ignored.

Only the console script (entry.py) installs it; ``cli.main`` run in-process keeps the
standard library's behaviour.
"""

from __future__ import annotations

import builtins
import contextlib
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

#: Kept no larger than this: a process that makes dataclasses by the thousand (none of
#: ours does) must not grow the file without end.
MAX_ENTRIES = 4096

_codes: dict[str, CodeType] = {}
_new = 0
_path: Path | None = None


def _cache_path() -> Path | None:
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    return Path(__file__).resolve().parent / "__pycache__" / f"dataclass-methods.{tag}.marshal"


def _load(path: Path) -> dict[str, CodeType]:
    try:
        loaded = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _exec(source: Any, globals_: Any = None, locals_: Any = None) -> None:
    global _new
    if isinstance(source, str):
        code = _codes.get(source)
        if code is None:
            code = compile(source, "<string>", "exec")
            if len(_codes) < MAX_ENTRIES:
                _codes[source] = code
                _new += 1
        source = code
    builtins.exec(source, globals_, locals_)


def install(path: Path | None = None) -> None:
    """Serve the dataclasses module's compiles from the cache at ``path`` (by default
    beside promptpath's bytecode), loaded now if there is one."""
    global _path
    import dataclasses

    if getattr(dataclasses, "exec", None) is _exec:
        return
    _path = _cache_path() if path is None else path
    if _path is not None:
        _codes.update(_load(_path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]


def compiled() -> int:
    """How many method sources this process compiled since the cache was loaded or saved."""
    return _new


def save() -> None:
    """Write the cache if this process compiled anything new (best effort)."""
    global _new
    if not _new or _path is None or sys.dont_write_bytecode:
        return
    _new = 0
    tmp = _path.with_name(f"{_path.name}.{os.getpid()}.tmp")
    try:
        _path.parent.mkdir(exist_ok=True)
        tmp.write_bytes(marshal.dumps(_codes))
        os.replace(tmp, _path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


__all__ = ["MAX_ENTRIES", "compiled", "install", "save"]

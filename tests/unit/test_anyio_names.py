"""anyio exports its API lazily (module __getattr__): a name's first lookup imports its
module. net/http.py looks up, before t0, the names a trace's stages look up, so no such
import lands inside a timed stage (the first httpcore lock did, in the request stage)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpcore

from promptpath.net.http import _ANYIO_NAMES

PACKAGE = Path(__file__).resolve().parents[2] / "promptpath"
#: Submodules (imported at the top of the modules that use them) and what never runs on
#: loopback TCP (httpcore's unix sockets).
NOT_LAZY = {"abc", "streams", "lowlevel", "to_thread", "_core", "connect_unix"}


def _names_in(files: list[Path]) -> set[str]:
    return {m for f in files for m in re.findall(r"\banyio\.([A-Za-z_]\w*)", f.read_text())}


def test_the_names_a_trace_looks_up_are_all_in_the_list() -> None:
    core = Path(httpcore.__file__).parent
    used = _names_in([core / "_synchronization.py", core / "_backends" / "anyio.py"])
    used |= _names_in([*(PACKAGE / "net").glob("*.py"), *(PACKAGE / "tracer").glob("*.py")])
    assert used - NOT_LAZY <= set(_ANYIO_NAMES), sorted(used - NOT_LAZY - set(_ANYIO_NAMES))


def test_building_the_transport_resolves_them_before_any_connection() -> None:
    code = (
        "import anyio; from promptpath.net.http import TCPTransport, _ANYIO_NAMES;"
        " before = [n for n in _ANYIO_NAMES if n in vars(anyio)]; TCPTransport();"
        " print(len(before) < len(_ANYIO_NAMES), all(n in vars(anyio) for n in _ANYIO_NAMES))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True"], out.stderr

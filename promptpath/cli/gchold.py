"""The cyclic collector held off while a CLI process starts.

The imports of a start-up make ~200,000 objects that live as long as the process;
collecting over them while they are made frees nothing and cost ~15-20 ms a run
(measured with ``gc.callbacks``: ~100 collections before the trace). The console script
(entry.py) holds the collector off from its first line; once the command's options are
parsed (cli.py's command ``invoke``) it comes back, with the start-up's objects frozen out
of its view (``gc.freeze``). ``cli.main`` run in-process (tests, library callers) never
holds it, so it keeps Python's defaults there.
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """The collector off until ``release`` (when it was on)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release() -> None:
    """The start-up is over: the collector back on, what exists now frozen out of its
    view. Nothing when ``hold`` did not turn it off."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()


__all__ = ["hold", "release"]

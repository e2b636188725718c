"""`promptpath watch`: the loop (loop.py), its rolling state and events (state.py, pure),
what it reads of each run document (metrics.py, facts.py), the path's hops (hops.py), the
history file (history.py), the screen (view.py) and the keys (keys.py)."""

from __future__ import annotations

from promptpath.modes.watch.loop import WatchMode

__all__ = ["WatchMode"]

"""The probes there are, by name: the one list that `--probe`'s check, both help texts
(`run --probe`, `probe NAMES`), the suite and docs/probes.md's table read.

It imports nothing, so `--help` lists the probes without loading any probe's I/O. Probe
NAME lives in ``promptpath/probes/<NAME, '-' as '_'>/``, whose ``probe.py`` registers a
``Probe`` of that name (``base.register``); tests/unit/test_probe_catalog.py holds the
folders, the registered classes, the help texts and the docs table to this list. A new
probe is its folder plus its name here.
"""

from __future__ import annotations

from typing import Final

#: Every probe, by the name a user types and its findings carry, in the order help lists them.
NAMES: Final = (
    "buffering",
    "idle-timeout",
    "dns-cache",
    "ghost-stream",
    "ratelimit",
    "tls",
    "cors",
    "path",
    "mtu",
    "upgrade",
    "edges",
    "prefill",
    "hol",
)


def folder_of(name: str) -> str:
    """The folder under promptpath/probes/ that holds probe ``name``."""
    return name.replace("-", "_")


def module_of(name: str) -> str:
    """The module whose import registers probe ``name``."""
    return f"promptpath.probes.{folder_of(name)}.probe"


def listed_names() -> str:
    """The names as the help texts list them: ``buffering, idle-timeout, ...``."""
    return ", ".join(NAMES)

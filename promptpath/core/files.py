"""Files a user names (certificates, keys, CA bundles, config files): what a file mode
says a path is, and how much of each such file is read at most. Pure: the reading is
``options.read_input``'s."""

from __future__ import annotations

import stat

__all__ = ["MAX_CONFIG_BYTES", "MAX_PEM_BYTES", "special_kind"]

#: A PEM file read at most: Mozilla's whole CA bundle is ~220 KB, a client chain a few KB.
MAX_PEM_BYTES = 4 << 20
#: A TOML config read at most: an exporter config naming 2,000 targets is ~300 KB.
MAX_CONFIG_BYTES = 4 << 20


def special_kind(mode: int) -> str | None:
    """What a file that is not a regular one is ("FIFO", "character device", ...), or
    None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "special file"

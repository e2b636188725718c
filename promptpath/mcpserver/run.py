"""`promptpath mcp`: its config loaded (the exporter's format: the allow-list of targets,
the modules, ``[mcp] connection_token_budget``), then one client served over stdio.

A problem found before serving is one line on stderr and exit 2 (stdout is the protocol's,
and stays empty): no --config, a config that does not load, the ``mcp`` extra missing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from promptpath.core.errors import PromptpathError, UsageError
from promptpath.environment import Environment

EXTRA: Final = "pip install 'promptpath[mcp]'"
#: Where the config comes from without --config: this server's own variable, then the
#: exporter's (the same file may serve both).
CONFIG_VARIABLES: Final = ("PROMPTPATH_MCP_CONFIG", "PROMPTPATH_EXPORTER_CONFIG")


def config_path(given: str | None, environ: Mapping[str, str]) -> Path:
    """--config, else the variables; UsageError when none names a file."""
    for value in (given, *(environ.get(name) for name in CONFIG_VARIABLES)):
        if value:
            return Path(value)
    raise UsageError(
        "--config FILE is needed (or PROMPTPATH_MCP_CONFIG): the MCP server probes only the"
        " targets its config names",
        kind="bad_option",
    )


def sdk_installed() -> bool:
    try:
        return importlib.util.find_spec("mcp.server") is not None
    except (ImportError, ValueError):
        return False


def run_mcp(config: str | None, env: Environment) -> int:
    """The server's exit code: 2 before serving, 0 when the client closed the connection,
    128 + the stop signal."""
    from promptpath.exporter.config import load

    try:
        path = config_path(config, env.environ)
        if not sdk_installed():
            raise UsageError(f"promptpath mcp needs the MCP SDK: {EXTRA}", kind="bad_option")
        loaded = load(path, env.environ)
    except PromptpathError as exc:
        print(f"promptpath: mcp: {exc.message}", file=env.stderr)
        return int(exc.exit_code)
    import anyio

    from promptpath.mcpserver.jobs import Session
    from promptpath.mcpserver.server import serve

    def stop(code: int) -> None:
        """End the process now, stdout flushed (cli/entry.py's way out, taken early)."""
        import os
        import sys

        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)

    # Only the real process may end itself: an in-process caller (a test's Environment)
    # gets the code back when its client closes the streams.
    on_stop = stop if env.stdout is sys.stdout else None
    code: int = anyio.run(serve, Session(loaded, env.environ), on_stop)
    return code


__all__ = ["CONFIG_VARIABLES", "EXTRA", "config_path", "run_mcp", "sdk_installed"]

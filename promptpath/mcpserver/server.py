"""`promptpath mcp`: the tools over stdio, with the official MCP SDK (the ``mcp`` extra).

The SDK's low-level server carries the JSON-RPC: ``tools/list`` answers the tool table
(tools.py, each input schema made from the CLI's option table) and ``tools/call`` checks
the arguments against it, then hands them to the connection's Session (jobs.py). Each
result is two text blocks, the one-line verdict and the JSON document, and the document
again as structured content; a refusal is an error result (``isError``) with the usage
error's short JSON object.

stdout is the protocol's: nothing else is ever written there. The SDK logs to stderr.
SIGTERM and SIGINT cut the runs in flight (each answers with what it measured, its error
naming the stage it was cut in), then the server exits 128 + the signal, as a run does;
the client closing stdin ends it with 0.
"""

from __future__ import annotations

import json
import signal
import warnings
from collections.abc import Callable
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning

from promptpath import __version__
from promptpath.core.errors import PromptpathError, UsageError
from promptpath.mcpserver.jobs import Reply, Session, refusal
from promptpath.mcpserver.tools import TOOLS, checked, input_schema, spec_of

NAME: Final = "promptpath"
INSTRUCTIONS: Final = (
    "Network-path diagnostics for streaming AI APIs. list_profiles names the targets this"
    " server may probe; trace times one prompt stage by stage; run_probes adds probes (their"
    " cost is stated first, dry_run states it alone). Every run spends tokens against this"
    " connection's limit."
)
#: After a stop signal: how long the cut runs have to answer before the server ends.
_ANSWER_GRACE_S: Final = 2.0
#: Then how long the SDK's writer task gets to put the cut runs' answers on stdout.
_WRITE_S: Final = 0.2


#: The result's ``_meta`` key of a run's stated cost.
COST_META: Final = "promptpath/cost"


def _result(reply: Reply) -> types.CallToolResult:
    """The verdict line, the document as `--json` prints it (and as structured content),
    and for a run its stated cost: a third text block and ``_meta["promptpath/cost"]``."""
    blocks = [reply.verdict, json.dumps(reply.document, ensure_ascii=False)]
    if reply.cost_line is not None:
        blocks.append(reply.cost_line)
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text=text) for text in blocks],
        structured_content=reply.document,
        is_error=reply.refused,
    )
    if reply.cost is not None:
        result.meta = {COST_META: reply.cost}  # (the field's alias is _meta)
    return result


class Tools:
    """The handlers the SDK calls, over one Session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.tools = TOOLS

    async def list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=s.name, description=s.description, input_schema=input_schema(s))
                for s in self.tools
            ]
        )

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            spec = spec_of(params.name, self.tools)
            arguments = checked(spec, params.arguments)
            reply = await self._call(ctx, spec.name, arguments)
        except PromptpathError as exc:
            reply = refusal(exc)
        except Exception as exc:  # a bug of ours: one line, exit code 70, no traceback
            reply = _bug(exc)
        return _result(reply)

    async def _call(self, ctx: Any, name: str, arguments: dict[str, Any]) -> Reply:
        session = self.session
        if name == "list_profiles":
            return session.list_profiles()
        if name == "diff_reports":
            from promptpath.mcpserver.diffing import diff_reports

            return diff_reports(arguments)
        probes = [str(p) for p in arguments.get("probe") or []]
        probe, plan, cost = session.prepare(arguments, probes)
        line = session.cost_line(probe.target, cost)
        if arguments.get("dry_run"):
            try:
                session.admit(probe, int(cost["tokens"]))
                allowed = True
            except UsageError:
                allowed = False
            return Reply(verdict=line, document={**cost, "allowed": allowed})
        session.admit(probe, int(cost["tokens"]))
        await _say(ctx, line)  # the cost, before anything is sent
        reply = await session.run(probe, plan, cost)
        return Reply(verdict=reply.verdict, document=reply.document, cost=cost, cost_line=line)


def _bug(exc: Exception) -> Reply:
    """A bug's answer, as the command line prints one (cli/faces.py): the exception's
    type and text, control characters escaped; exit code 70."""
    from promptpath.core.exitcodes import ExitCode
    from promptpath.core.textsafe import visible

    message = f"internal error: {type(exc).__name__}: {visible(str(exc))[:300]}"
    document = {
        "schema": "promptpath.run/1",
        "ok": False,
        "exit_code": int(ExitCode.INTERNAL),
        "error": {"message": message},
    }
    return Reply(verdict=f"promptpath: {message}", document=document, refused=True)


async def _say(ctx: Any, line: str) -> None:
    """One notice to the client before a run starts: a progress notification when the call
    asked for progress, and a log message (the protocol's older way, still what most
    clients show)."""
    meta = getattr(ctx, "meta", None)  # a TypedDict (RequestParamsMeta), or None
    token = meta.get("progress_token") if isinstance(meta, dict) else None
    try:
        if token is not None:
            await ctx.session.send_progress_notification(token, 0.0, message=line)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message(
                "info", line, logger=NAME, related_request_id=ctx.request_id
            )
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # the client went away: the run's answer will find nobody either


async def serve(session: Session, on_stop: Callable[[int], None] | None = None) -> int:
    """Serve one client over stdin/stdout until it closes them (0) or a stop signal:
    the runs in flight are cut and answered, then ``on_stop(128 + the signal)`` ends the
    process (the SDK's stdin reader is a thread no cancellation reaches: the server would
    wait for the client's next line otherwise); without it, the code is returned once the
    client closes stdin."""
    tools = Tools(session)
    server: Server[Any] = Server(
        NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
    )
    stopped: list[signal.Signals] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    stopped.append(signal.Signals(signum))
                    session.stop.cut(stopped[0])
                    with anyio.move_on_after(_ANSWER_GRACE_S):
                        while session.guard.in_flight:
                            await anyio.sleep(0.02)
                    await anyio.sleep(_WRITE_S)  # the answers' writer runs
                    if on_stop is not None:
                        on_stop(128 + int(stopped[0]))
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()
    return 128 + int(stopped[0]) if stopped else 0


__all__ = ["Tools", "serve"]

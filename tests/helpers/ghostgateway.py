"""TEST FIXTURE: a deliberately bad application gateway that ghosts its upstream.

It plays the gateway the handbook warns about: the upstream response is consumed by a
task of its own, which nobody cancels when the client leaves, so the model keeps
generating (and billing) tokens nobody will read. Real hops checked here (nginx, mitmproxy)
all propagate a disconnect; this fixture gives the ghost-stream probe a ``fail`` to find.

Plain HTTP/1.1 on loopback, one request per connection, any method and path forwarded to
``--upstream`` (so ``GET /stats/requests/ID`` reaches the canary through it too). Run as
``python -m tests.helpers.ghostgateway --upstream http://127.0.0.1:PORT``; it prints its
port on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

import httpx

_HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"host"}


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, list[tuple[bytes, bytes]], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = []
    length = 0
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        key = name.strip().lower().encode()
        if key == b"content-length":
            length = int(value)
        headers.append((key, value.strip().encode("latin-1")))
    body = await reader.readexactly(length) if length else b""
    return method, path, headers, body


def handler(client: httpx.AsyncClient, upstream: str):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, headers, body = await _read_request(reader)
        except (asyncio.IncompleteReadError, ValueError):
            writer.close()
            return
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        start: asyncio.Future[httpx.Response] = asyncio.get_running_loop().create_future()
        forward = [(k, v) for k, v in headers if k not in _HOP_BY_HOP]

        async def pump() -> None:
            # The ghost: this task reads the upstream to its end whatever the client does.
            request = client.build_request(method, upstream + path, headers=forward, content=body)
            response = await client.send(request, stream=True)
            start.set_result(response)
            try:
                async for chunk in response.aiter_raw():
                    await chunks.put(chunk)
            finally:
                await response.aclose()
                await chunks.put(None)

        task = asyncio.create_task(pump())
        pumps.add(task)
        task.add_done_callback(pumps.discard)
        response = await start
        head = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}".encode()]
        head += [k + b": " + v for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP]
        head.append(b"connection: close")
        try:
            writer.write(b"\r\n".join(head) + b"\r\n\r\n")
            await writer.drain()
            while (chunk := await chunks.get()) is not None:
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass  # the client left; the pump goes on regardless
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    return handle


pumps: set[asyncio.Task[None]] = set()


async def main(upstream: str) -> None:
    async with httpx.AsyncClient(timeout=None, trust_env=False) as client:
        server = await asyncio.start_server(handler(client, upstream.rstrip("/")), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        async with server:
            await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(parser.parse_args(sys.argv[1:]).upstream))

"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, for the HTML
and SVG report tests: load a file offline, collect console errors and every request the page
tries, measure elements, take a screenshot.

Offline for real: every name resolves to nothing (``--host-resolver-rules``) and every
request that would leave goes to a loopback sink that counts connections (``--proxy-server``),
so a page that tried to fetch something is caught even if the browser let it through.
The CDP transport is wsproto over a plain socket (wsproto ships with hypercorn).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Request,
    TextMessage,
)

FLAGS = (
    "--headless=new",
    "--no-sandbox",  # as root Chromium runs only without its sandbox
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
)
#: Console levels a clean page never logs at.
_LOUD = ("error", "warning")
_LISTENING = re.compile(r"DevTools listening on (ws://[^\s]+)")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Sink:
    """A loopback listener standing in for the whole network: it counts who came."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


@dataclass
class Page:
    """One tab over CDP: ``call`` a method, read the events that arrived meanwhile."""

    sock: socket.socket
    ws: WSConnection
    events: list[dict[str, Any]] = field(default_factory=list)
    _next_id: int = 0
    _buffer: str = ""

    def _send(self, payload: dict[str, Any]) -> None:
        self.sock.sendall(self.ws.send(TextMessage(data=json.dumps(payload))))

    def _receive(self, deadline: float) -> list[dict[str, Any]]:
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("DevTools closed the connection")
        self.ws.receive_data(data)
        out = []
        for event in self.ws.events():
            if isinstance(event, TextMessage):
                self._buffer += event.data
                if event.message_finished:
                    out.append(json.loads(self._buffer))
                    self._buffer = ""
            elif isinstance(event, CloseConnection):
                raise ConnectionError("DevTools closed the connection")
        return out

    def call(self, method: str, timeout: float = 20.0, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        self._send({"id": ident, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            for message in self._receive(deadline):
                if message.get("id") == ident:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return dict(message.get("result", {}))
                if "method" in message:
                    self.events.append(message)

    def wait_for(self, method: str, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for seen in self.events:
                if seen["method"] == method:
                    return seen
            for message in self._receive(deadline):
                if "method" in message:
                    self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])


@dataclass
class Loaded:
    """What one page load showed: console errors, requests that tried to leave."""

    page: Page
    console_errors: list[str]
    requests: list[str]


@contextmanager
def browser() -> Iterator[Browser]:
    path = chromium_path()
    if path is None:
        raise FileNotFoundError("chromium")
    sink = _Sink()
    profile = tempfile.mkdtemp(prefix="promptpath-chromium-")
    proc = subprocess.Popen(
        [path, *FLAGS, f"--proxy-server=127.0.0.1:{sink.port}", f"--user-data-dir={profile}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError(f"chromium exited {proc.returncode}")
            match = _LISTENING.search(line)
            if match:
                port = int(match.group(1).split(":")[2].split("/")[0])
        if port is None:
            raise RuntimeError("chromium never printed its DevTools address")
        # Keep reading its stderr so it never blocks on a full pipe.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield Browser(port=port, sink=sink)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        sink.sock.close()
        shutil.rmtree(profile, ignore_errors=True)


@dataclass
class Browser:
    port: int
    sink: _Sink

    def _new_target(self) -> str:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT"
        )
        # The DevTools endpoint is loopback: no proxy, whatever the environment says.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=10) as response:
            return str(json.loads(response.read())["webSocketDebuggerUrl"])

    def load(self, path: str, *, width: int = 1100, height: int = 1600) -> Loaded:
        """Open ``path`` (a file) in a new tab and let it settle."""
        url = self._new_target()
        host_port, resource = url.removeprefix("ws://").split("/", 1)
        sock = socket.create_connection(("127.0.0.1", int(host_port.split(":")[1])), timeout=10)
        ws = WSConnection(ConnectionType.CLIENT)
        sock.sendall(ws.send(Request(host=host_port, target="/" + resource)))
        accepted = False
        while not accepted:
            ws.receive_data(sock.recv(65536))
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    accepted = True
                elif isinstance(event, (BytesMessage, CloseConnection)):
                    raise RuntimeError("DevTools refused the WebSocket")
        page = Page(sock=sock, ws=ws)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        page.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        page.call("Page.navigate", url="file://" + os.path.abspath(path))
        page.wait_for("Page.loadEventFired")
        page.evaluate("1")  # a round trip after load: late console messages have arrived
        errors, requests = [], []
        for event in page.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in _LOUD:
                errors.append(json.dumps(params.get("args")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in _LOUD:
                errors.append(str(params["entry"].get("text")))
            elif method == "Network.requestWillBeSent":
                requests.append(str(params.get("request", {}).get("url")))
        return Loaded(page=page, console_errors=errors, requests=requests)

"""The LiteLLM proxy on loopback for lab tests: an OpenAI-compatible gateway in front of
the reference endpoint, with its own config in a temp dir.

LiteLLM pins its own dependency set, so ``.ci/run`` installs it into a virtual
environment of its own, ``.lab/litellm`` (as mitmproxy). Checked by hand (LiteLLM
1.106.12): with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` it reads the bundled cost map
instead of downloading one, and ``strace -f -e trace=connect`` over start-up and three
proxied requests showed three connect() calls, all to 127.0.0.1 (the upstream): no
telemetry, no other address. ``LITELLM_TELEMETRY=False`` is set too, for versions that
still read it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import lab_required
from tests.helpers import proxylab

LITELLM_VERSION = "1.106.12"
LAB_VENV = Path(__file__).resolve().parents[2] / ".lab" / "litellm"
MASTER_KEY = "sk-promptpath-lab"
MODEL = "canary"
#: Measured: 12 s from exec to a listening port on an idle 2-core machine (it imports
#: the whole proxy before uvicorn binds); allow for a loaded one. 90 s was not enough once
#: in 10 flake-check rounds (load ~9 with two CPU hogs: not a line in its log by then).
#: A wait, not a bound on anything measured: it is polled every 0.2 s.
READY_TIMEOUT_S = 240.0


def litellm_binary() -> str:
    """Path of the ``litellm`` proxy CLI, or skip (a failure under PROMPTPATH_REQUIRE_LAB=1)."""
    candidate = LAB_VENV / "bin" / "litellm"
    if candidate.exists():
        return str(candidate)
    reason = (
        f"the LiteLLM proxy is not installed (.ci/run installs litellm[proxy]=={LITELLM_VERSION}"
        " into .lab/litellm: python3 -m venv .lab/litellm && .lab/litellm/bin/pip install"
        f" 'litellm[proxy]=={LITELLM_VERSION}')"
    )
    if lab_required():
        pytest.fail(f"PROMPTPATH_REQUIRE_LAB=1 but {reason}")
    pytest.skip(reason)


def config(upstream_port: int) -> str:
    """One model routed to the reference endpoint as an openai-compatible upstream; header
    forwarding left at its default (off: no forward_client_headers_to_llm_api)."""
    return f"""model_list:
  - model_name: {MODEL}
    litellm_params:
      model: openai/{MODEL}
      api_base: http://{proxylab.LOOPBACK}:{upstream_port}/v1
      api_key: upstream-needs-none
general_settings:
  master_key: {MASTER_KEY}
"""


def _ready(port: int) -> bool:
    url = f"http://{proxylab.LOOPBACK}:{port}/health/liveliness"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no *_proxy
    try:
        with direct.open(url, timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def litellm_proxy(upstream_port: int, tmp_path: Path) -> Iterator[proxylab.Proxy]:
    """``litellm --config`` on a free 127.0.0.1 port until the block ends."""
    binary = litellm_binary()
    directory = tmp_path / f"litellm-{time.monotonic_ns()}"
    directory.mkdir(parents=True)
    conf = directory / "config.yaml"
    conf.write_text(config(upstream_port))
    port = proxylab.free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(directory),  # nothing read from or written to the developer's home
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_DONT_SHOW_FEEDBACK_BOX": "true",
    }
    args = [binary, "--config", str(conf), "--host", proxylab.LOOPBACK, "--port", str(port)]
    log = (directory / "litellm.log").open("wb")
    process = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=directory, env=env
    )
    log.close()
    proxy = proxylab.Proxy(
        name="litellm",
        url=f"http://{proxylab.LOOPBACK}:{port}",
        port=port,
        directory=directory,
        process=process,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(port):
            if process.poll() is not None:
                pytest.fail(f"litellm exited with status {process.returncode}\n{proxy.logs()}")
            if time.monotonic() > deadline:
                pytest.fail(f"litellm was not ready within {READY_TIMEOUT_S:g} s\n{proxy.logs()}")
            time.sleep(0.2)
        yield proxy
    finally:
        proxylab._stop(process)

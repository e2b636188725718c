"""The commands the docs show, found and pointed at loopback, for the tests that run them
(tests/integration/test_docs_commands.py, and tests/lab/test_docs_lab_commands.py for the
lines that need a forward proxy or a Pushgateway).

A line's target is rewritten the way a reader would point it at their own endpoint: the
URL's host and port become the reference endpoint's (127.0.0.1, or ``localhost`` when the
line pins the name with --resolve/--connect-to, whose addresses become 127.0.0.1 too), a
profile name gets a profile file of that name pointing there, --cacert becomes the
endpoint's CA, --cert/--key a client certificate its --client-ca trusts, a proxy or a
Pushgateway the one the lab test started, and files the line writes land in a temp dir.
Nothing else in the line changes. A series gets ``--max-tokens 8`` (when the line gives
none) so that the docs' sweeps stay within seconds, and a watch three traces (or its
--count) with no pause between them. Before a line runs, every address in
it is checked to be loopback: a line the rewrite cannot bring there fails rather than
reach out.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import typer

from promptpath.cli.faces import app
from tests.helpers.refserver import RefServer

ROOT = Path(__file__).parents[2]
DOC_FILES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Shell commands the docs may show that are not promptpath runs: set-up, tests, checks,
#: and the impairer lab (root only). CI runs the test commands themselves (.ci/run).
KNOWN_COMMANDS = (
    "python3 -m venv .venv",
    ".venv/bin/pip install -e '.[dev]'",
    ".venv/bin/python -m pytest -q",
    ".venv/bin/ruff check promptpath tests benchmarks",
    ".venv/bin/ruff format --check promptpath tests benchmarks",
    ".venv/bin/mypy",
    ".ci/run",
    ".venv/bin/python -m tests.helpers.impairer ",
)
_OPERATORS = {">", ">>", "|", "2>", "2>&1", "<", ";"}
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True, slots=True)
class DocCommand:
    """One ``promptpath`` command as a doc shows it."""

    where: str  # file:line
    text: str  # the command as written (continuations joined)
    env: dict[str, str] = field(hash=False)  # VAR=value words before it
    argv: list[str] = field(hash=False)  # after ``promptpath``, up to a shell operator
    netns: bool = False  # run inside ``ip netns exec``: the impairer lab, root only


def fenced(text: str, lang: str) -> Iterator[tuple[int, str]]:
    """(line number of the fence, block body) of each ```lang block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == f"```{lang}":
            start = i
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            yield start + 1, "\n".join(body)
        i += 1


def shell_lines() -> Iterator[tuple[str, str]]:
    """(file:line, one command) for every command of every sh block; ``a && b`` is two."""
    for path in DOC_FILES:
        name = path.relative_to(ROOT).as_posix()
        for fence, body in fenced(path.read_text(), "sh"):
            joined = body.replace("\\\n", " ")
            for offset, line in enumerate(joined.splitlines(), start=1):
                part: list[str] = []
                for word in [*shlex.split(line, comments=True), "&&"]:
                    if word != "&&":
                        part.append(word)
                    elif part:
                        yield f"{name}:{fence + offset}", shlex.join(part)
                        part = []


def as_doc_command(where: str, line: str) -> DocCommand | None:
    words = shlex.split(line)
    env: dict[str, str] = {}
    while words and _ENV_WORD.match(words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    netns = words[:3] == ["ip", "netns", "exec"]
    if netns:
        words = words[4:]
    if not words or words[0] not in ("promptpath", ".venv/bin/promptpath"):
        return None
    end = next((i for i, w in enumerate(words) if w in _OPERATORS), len(words))
    return DocCommand(where=where, text=line, env=env, argv=words[1:end], netns=netns)


SHELL_LINES = list(shell_lines())


def _unique(commands: list[DocCommand]) -> list[DocCommand]:
    """One of each command: the set-up line that README and CONTRIBUTING both show runs once."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for cmd in commands:
        key = (tuple(cmd.argv), tuple(sorted(cmd.env.items())), cmd.netns)
        if key not in seen:
            seen.add(key)
            out.append(cmd)
    return out


COMMANDS = _unique([c for w, line in SHELL_LINES if (c := as_doc_command(w, line)) is not None])


def needs_lab(cmd: DocCommand) -> str | None:
    """Why this line cannot run on this layer (it is parsed instead), or None."""
    if cmd.netns:
        return "runs inside the impairer lab's network namespace (root)"
    if any(w in ("-x", "--proxy") or w.startswith("--proxy=") for w in cmd.argv) or any(
        k.lower() in ("https_proxy", "http_proxy", "all_proxy") for k in cmd.env
    ):
        return "goes through a forward proxy (squid/tinyproxy: tests/lab)"
    if "--pushgateway" in cmd.argv:
        return "pushes to a Prometheus Pushgateway (tests/lab)"
    if "--pcap" in cmd.argv:
        return "captures packets: dumpcap or CAP_NET_RAW (tests/lab)"
    if cmd.argv[:1] == ["vantage"]:
        return "asks a Prometheus that scrapes exporters (tests/lab/test_vantage.py runs it)"
    return None


RUNNABLE = [c for c in COMMANDS if needs_lab(c) is None]
PARSED_ONLY = [c for c in COMMANDS if needs_lab(c) is not None]


# -- the real parser ----------------------------------------------------------------------


def _click_command(name: str) -> Any:
    group: Any = typer.main.get_command(app)
    return group.commands[name]


def _value_options(name: str) -> set[str]:
    """The options of ``promptpath NAME`` that take a value (the rest are flags)."""
    out: set[str] = set()
    for param in _click_command(name).params:
        if getattr(param, "is_flag", False) or param.param_type_name != "option":
            continue
        out.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("-"))
    return out


def parses(argv: list[str]) -> dict[str, Any]:
    """``promptpath ARGV`` through the command's own parser, nothing invoked: option names
    exist and values convert (click raises otherwise)."""
    command = _click_command(argv[0])
    ctx = command.make_context(argv[0], list(argv[1:]))
    return dict(ctx.params)


# -- rewriting a line to loopback ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientPki:
    """A client CA (for the endpoint's --client-ca) and a certificate it signed."""

    ca: Path
    cert: Path
    key: Path


def make_client_pki(directory: Path) -> ClientPki:
    import trustme

    ca = trustme.CA(organization_name="docs client CA")
    leaf = ca.issue_cert("reader@example.com", common_name="reader")
    files = ClientPki(
        ca=directory / "client-ca.pem", cert=directory / "client.pem", key=directory / "client.key"
    )
    ca.cert_pem.write_to_path(str(files.ca))
    leaf.cert_chain_pems[0].write_to_path(str(files.cert))
    leaf.private_key_pem.write_to_path(str(files.key))
    return files


#: The reference endpoint for the docs' lines: tokens at 200/s (its default is 50), so a run
#: streams its 32 tokens in ~0.2 s.
FAST_ENDPOINT = ("--rate", "200")


#: The endpoint a rewritten line goes to, by name (``tls_ref``, ``plain_ref``, ``mtls_ref``),
#: started when a line first needs it.
Servers = Callable[[str], RefServer]


@dataclass(frozen=True, slots=True)
class Lab:
    """What a lab test started for the lines that need it (URLs on loopback)."""

    proxy: str | None = None
    pushgateway: str | None = None
    otlp: str | None = None  # an OTLP/HTTP receiver (tests/helpers/otlpreceiver.py)


def _positional_index(argv: list[str], value_options: set[str]) -> int | None:
    i = 1
    while i < len(argv):
        word = argv[i]
        if word.startswith("-") and word != "-":
            if word in value_options:
                i += 2
                continue
            i += 1
            continue
        return i
    return None


def _pinned(argv: list[str]) -> bool:
    return any(w in ("--resolve", "--connect-to") for w in argv)


_PROXY_VARIABLES = {"https_proxy", "http_proxy", "all_proxy"}
_WRITTEN = ("--junit", "--har", "--prom-textfile", "--pcap")


def rewrite(
    cmd: DocCommand, servers: Servers, pki: ClientPki, tmp_path: Path, lab: Lab | None = None
) -> tuple[list[str], dict[str, str]]:
    """The line pointed at the reference endpoint on loopback: (argv, environment)."""
    lab = lab or Lab()
    argv = list(cmd.argv)
    env = dict(cmd.env)
    value_options = _value_options(argv[0])
    pinned = _pinned(argv)
    target_at = _positional_index(argv, value_options)
    assert target_at is not None, f"{cmd.where}: no TARGET in {cmd.text}"
    target = argv[target_at]
    host = "localhost" if pinned else "127.0.0.1"
    if "://" in target:
        parts = urlsplit(target)
        if parts.scheme in ("https", "wss"):
            server = servers("mtls_ref" if "--cert" in argv else "tls_ref")
        else:
            server = servers("plain_ref")
        argv[target_at] = urlunsplit(
            (parts.scheme, f"{host}:{server.port}", parts.path, parts.query, "")
        )
    else:  # a profile: one of that name, pointed at the endpoint
        server = servers("tls_ref")
        config = tmp_path / "promptpath.toml"
        config.write_text(
            f'[profiles.{target}]\nurl = "{server.url}/v1/chat/completions"\n'
            f'cacert = "{server.ca}"\n'
        )
        env["PROMPTPATH_CONFIG"] = str(config)
    port = server.port
    replacements: dict[str, Callable[[str], str]] = {
        "--resolve": lambda _: f"localhost:{port}:127.0.0.1",
        "--connect-to": lambda _: f"localhost:{port}:127.0.0.1:{port}",
        "--cacert": lambda _: str(server.ca),
        "--cert": lambda _: str(pki.cert),
        "--key": lambda _: str(pki.key),
        "--canary-admin": lambda _: server.url,
        "--noproxy": lambda _: host,  # the target's name: going direct stays going direct
        "-x": lambda v: _lab_url(lab.proxy, v),
        "--proxy": lambda v: _lab_url(lab.proxy, v),
        "--pushgateway": lambda v: _lab_url(lab.pushgateway, v),
        "--otlp-endpoint": lambda v: _lab_url(lab.otlp, v),
        **{flag: (lambda v: str(tmp_path / Path(v).name)) for flag in _WRITTEN},
    }
    i = 1
    while i < len(argv):
        if argv[i] in value_options:
            change = replacements.get(argv[i])
            if change is not None:
                argv[i + 1] = change(argv[i + 1])
            i += 2
        else:
            i += 1
    for name in list(env):
        if name.lower() in _PROXY_VARIABLES:
            env[name] = _lab_url(lab.proxy, env[name])
        elif name == "OTEL_EXPORTER_OTLP_ENDPOINT":
            env[name] = _lab_url(lab.otlp, env[name])
    if argv[0] == "watch":
        # A watch runs until stopped, a pause between traces: here three traces (or the
        # line's --count), with none (the last --interval given is the one that counts).
        if "--count" not in argv and "--duration" not in argv:
            argv += ["--count", "3"]
        argv += ["--interval", "0", "--budget", "0"]
    secure = target.startswith(("https://", "wss://"))
    if secure and "--cacert" not in argv and "-k" not in argv:
        argv += ["--cacert", str(server.ca)]  # the real endpoint's CA is a public one
    if "--count" in argv and "--max-tokens" not in argv:
        argv += ["--max-tokens", "8"]
    return argv, env


def _lab_url(started: str | None, shown: str) -> str:
    assert started is not None, f"{shown}: this line needs a lab test to start one"
    return started


def _loopback(host: str | None) -> bool:
    return host in LOOPBACK_NAMES


def assert_loopback_only(argv: list[str], env: dict[str, str]) -> None:
    """No address in the line may be anything but loopback: checked before it runs."""
    for word in [*argv, *env.values()]:
        for url in re.findall(r"[a-z][a-z0-9+.-]*://[^\s'\"]+", word):
            assert _loopback(urlsplit(url).hostname), f"{url} is not loopback"
    for opt, value in itertools.pairwise(argv):
        if opt == "--resolve":
            assert _loopback(value.split(":", 2)[2]), value
        elif opt == "--connect-to":
            assert _loopback(value.split(":")[2]), value
        elif opt in ("-x", "--proxy", "--pushgateway", "--otlp-endpoint"):
            assert _loopback(urlsplit(value).hostname), f"{opt} {value}"
        assert opt not in ("--resolver", "--authoritative"), (
            f"{opt} {value}: this line needs a rewrite rule before it may run"
        )

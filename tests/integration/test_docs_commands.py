"""Every command the docs show is run: each ``promptpath`` line of a ```` ```sh ```` block in
README.md, CONTRIBUTING.md and docs/*.md, against the reference endpoint on loopback, its
target rewritten there (tests/helpers/doccommands.py says how).

Lines that need something this layer does not start (a forward proxy, a Pushgateway, a
network namespace as root) are parsed by the real command's parser here (their options
exist, their values convert) and run in tests/lab/test_docs_lab_commands.py. Every other
line of a sh block must be one of the known set-up and test commands, so a new kind of
command cannot slip in untested. Every ```` ```toml ```` block must load as a profile file
(or, one with ``[modules.…]`` tables, as an exporter config), and every relative link and
anchor must lead somewhere.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptpath.exporter.config import load as load_exporter_config
from promptpath.plan.profiles import load_profile
from promptpath.probes.suite import load_builtin
from promptpath.tracer.request import is_secret_header
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.doccommands import (
    COMMANDS,
    DOC_FILES,
    FAST_ENDPOINT,
    KNOWN_COMMANDS,
    LOOPBACK_NAMES,
    PARSED_ONLY,
    ROOT,
    RUNNABLE,
    SHELL_LINES,
    ClientPki,
    DocCommand,
    Lab,
    as_doc_command,
    assert_loopback_only,
    fenced,
    make_client_pki,
    parses,
    rewrite,
)
from tests.helpers.otlpreceiver import OtlpReceiver, otlp_receiver
from tests.helpers.refserver import RefServer, _wait_listening, reference_server

# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True, http3=True, extra_args=FAST_ENDPOINT, tmp_path=tmp_path_factory.mktemp("ref")
    ) as server:
        yield server


@pytest.fixture(scope="module")
def plain_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=False, extra_args=FAST_ENDPOINT, tmp_path=tmp_path_factory.mktemp("plain")
    ) as server:
        yield server


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ClientPki:
    return make_client_pki(tmp_path_factory.mktemp("client-pki"))


@pytest.fixture(scope="module")
def mtls_ref(tmp_path_factory: pytest.TempPathFactory, pki: ClientPki) -> Iterator[RefServer]:
    with reference_server(
        tls=True,
        extra_args=(*FAST_ENDPOINT, "--client-ca", str(pki.ca)),
        tmp_path=tmp_path_factory.mktemp("mtls"),
    ) as server:
        yield server


# -- the tests ----------------------------------------------------------------------------


def test_the_docs_show_commands_and_every_line_is_known() -> None:
    assert len(COMMANDS) >= 20, "the sh blocks were not found"
    unknown = [
        f"{where}: {line}"
        for where, line in SHELL_LINES
        if as_doc_command(where, line) is None
        and not any(line == k or line.startswith(k) for k in KNOWN_COMMANDS)
    ]
    assert not unknown, "commands no test runs or knows:\n" + "\n".join(unknown)


def test_readme_keeps_the_two_set_up_commands_and_ci_runs_its_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = next(body for _, body in fenced(readme, "sh"))
    assert quick.splitlines() == [
        "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/promptpath demo",
        ".venv/bin/python -m pytest -q",
    ]
    assert "-m 'unit or integration'" in readme
    ci = (ROOT / ".ci/run").read_text()
    assert re.search(r"^\.venv/bin/python -m pytest -q$", ci, re.M)
    assert len(readme.splitlines()) <= 300


def test_some_lines_carry_keys_so_the_not_shown_check_bites() -> None:
    carrying = [c.where for c in RUNNABLE if _secrets_of(c.argv, c.env)]
    assert len(carrying) >= 2, carrying
    assert any(c.startswith("docs/security.md") for c in carrying)


def test_relative_links_in_the_docs_resolve() -> None:
    broken = []
    for path in DOC_FILES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if "://" in target:
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_anchors_the_docs_link_to_exist() -> None:
    def slugs(path: Path) -> set[str]:
        out = set()
        for heading in re.findall(r"^#+ (.+)$", path.read_text(), re.M):
            slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
            out.add(slug)
        return out

    missing = []
    for path in DOC_FILES:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", path.read_text()):
            linked = path if not target else (path.parent / target)
            if linked.suffix == ".md" and anchor not in slugs(linked):
                missing.append(f"{path.relative_to(ROOT)} -> {target}#{anchor}")
    assert not missing, missing


@pytest.mark.parametrize(
    "path",
    [p for p in DOC_FILES if any(True for _ in fenced(p.read_text(), "toml"))],
    ids=lambda p: p.name,
)
def test_toml_blocks_load_as_profiles(path: Path, tmp_path: Path) -> None:
    """A profile the docs show is one promptpath accepts: known keys, right types."""
    blocks = [body for _, body in fenced(path.read_text(), "toml") if not _is_exporter(body)]
    if not blocks:
        exporter_blocks = [body for _, body in fenced(path.read_text(), "toml")]
        for body in exporter_blocks:
            config = tmp_path / "exporter.toml"
            config.write_text(body)
            loaded = load_exporter_config(config, {})
            assert loaded.targets and loaded.modules, f"{path.name}: an empty exporter config"
        return
    config = tmp_path / "config.toml"
    # An [x.slo] table alone needs its profile's url to load; the docs show it apart.
    config.write_text("\n".join(blocks) + "\n")
    config.chmod(0o600)
    text = config.read_text()
    names = set(re.findall(r"^\[profiles\.([A-Za-z0-9_-]+)\]", text, re.M))
    assert names, f"{path.name}: a toml block that defines no profile"
    for name in names:
        profile = load_profile(name, config)
        assert profile["url"].startswith("https://")
    for name in set(re.findall(r"^\[profiles\.([A-Za-z0-9_-]+)\.slo\]", text, re.M)):
        assert load_profile(name, config)["slo"]


@pytest.mark.parametrize("cmd", PARSED_ONLY, ids=[c.where for c in PARSED_ONLY])
def test_lines_that_need_a_lab_parse(cmd: DocCommand) -> None:
    params = parses(cmd.argv)
    assert params, cmd.text


@pytest.mark.parametrize("cmd", RUNNABLE, ids=[c.where for c in RUNNABLE])
def test_doc_command_runs_against_the_reference_endpoint(
    cmd: DocCommand,
    request: pytest.FixtureRequest,
    pki: ClientPki,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # files a line writes (> trace.json, --junit FILE) land here
    if cmd.argv[0] == "serve":
        _serve(cmd, tmp_path)
        return
    if cmd.argv[0] == "exporter":
        _exporter(cmd, request.getfixturevalue("tls_ref"), tmp_path)
        return
    if cmd.argv[0] == "diff":
        _diff(cmd, request.getfixturevalue("tls_ref"), tmp_path)
        return
    if "--baseline" in cmd.argv:  # the saved series it names, slower than the line's own
        saved = tmp_path / cmd.argv[cmd.argv.index("--baseline") + 1]
        saved.write_text(_saved_series(request.getfixturevalue("tls_ref"), ttft_ms=200))
    if cmd.argv[0] == "demo":
        res = run_cli(*cmd.argv, environ=cmd.env)
        options = dict(itertools.pairwise(cmd.argv))
        # A demo through a broken hop exits 1: its probe found the hop, as the page says.
        broken = options.get("--hop") not in (None, "clean")
        assert res.exit_code == (1 if broken else 0), f"{cmd.where}: {cmd.text}\n{res.stderr}"
        if broken:
            assert "[FAIL]" in res.stdout + res.stderr, f"{cmd.where}: the hop was not found"
        for flag in ("--html", "--svg", "--markdown"):
            if flag in options:
                written = Path(options[flag])
                assert written.stat().st_size > 0, f"{flag} wrote nothing"
        return
    exports_otlp = "--otlp-endpoint" in cmd.argv or "OTEL_EXPORTER_OTLP_ENDPOINT" in cmd.env
    receiver: OtlpReceiver | None = request.getfixturevalue("otlp") if exports_otlp else None
    lab = Lab(otlp=None if receiver is None else receiver.url)
    if receiver is not None:
        receiver.clear()
    argv, env = rewrite(cmd, request.getfixturevalue, pki, tmp_path, lab)
    assert_loopback_only(argv, env)
    res = run_cli(*argv, environ=env)
    if receiver is not None:  # the collector got the run's spans and metrics
        assert receiver.of("/v1/traces") and receiver.of("/v1/metrics"), f"{cmd.where}: no OTLP"
    assert res.exit_code == 0, f"{cmd.where}: {cmd.text}\nran: {shlex.join(argv)}\n{res.stderr}"
    for secret in _secrets_of(argv, env):  # docs/security.md: a key is never shown
        assert secret not in res.stdout + res.stderr, f"{cmd.where}: a key was shown"
    if "--json" in argv:
        body = json.loads(res.stdout)
        assert body["exit_code"] == 0 and str(body["schema"]).startswith("promptpath.")
    _did_what_it_says(cmd, argv, res)
    for flag in ("--junit", "--har", "--prom-textfile", "--html", "--svg", "--markdown"):
        if flag in argv:
            written = Path(argv[argv.index(flag) + 1])
            assert written.stat().st_size > 0, f"{flag} wrote nothing"


def _did_what_it_says(cmd: DocCommand, argv: list[str], res: CliResult) -> None:
    """The line's main option took effect, as the page beside it says."""
    shown = res.stdout + res.stderr
    options = dict(itertools.pairwise(argv))
    if options.get("--http") == "3" or "--compare-http" in argv:
        assert "HTTP/3" in shown, f"{cmd.where}: no HTTP/3 in the report"
    if "--compare-http" in argv:
        assert "HTTP/2" in shown, f"{cmd.where}: no HTTP/2 in the comparison"
    probes = set(load_builtin())
    asked = {w for w in argv[2:] if w in probes} if argv[0] == "probe" else set()
    asked |= {n for w in options.get("--probe", "").split(",") for n in [w.strip()] if n}
    if argv[0] == "probe" and not asked:
        asked = probes  # probe TARGET alone runs them all
    for name in asked:
        assert name in shown, f"{cmd.where}: no {name} finding in the report"
    if "--json" in argv and "--count" in argv:
        levels = options.get("--concurrency", "1").count(",") + 1
        body = json.loads(res.stdout)
        assert body["schema"] == "promptpath.series/1"
        assert len(body["runs"]) == int(options["--count"]) * levels


def _secrets_of(argv: list[str], env: dict[str, str]) -> list[str]:
    """The keys a line carries: *_API_KEY variables and credential headers given with -H."""
    values = [v for k, v in env.items() if k.endswith("_API_KEY")]
    for opt, value in itertools.pairwise(argv):
        if opt in ("-H", "--header") and ":" in value:
            name, _, given = value.partition(":")
            if is_secret_header(name.strip()):
                values.append(given.strip())
    return values


def _serve(cmd: DocCommand, tmp_path: Path) -> None:
    """``promptpath serve ...`` as shown, on a free port and with its files in tmp_path;
    listening, and a trace against it finishes."""
    argv = list(cmd.argv)
    for i, word in enumerate(argv[:-1]):
        if word == "--port":
            argv[i + 1] = "0"
        elif word in ("--self-signed",):
            argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
        elif word == "--host":
            assert argv[i + 1] in LOOPBACK_NAMES, f"{cmd.where}: serve on {argv[i + 1]}"
    if "--port" not in argv:
        argv += ["--port", "0"]
    with _process([sys.executable, "-m", "promptpath", *argv], tmp_path) as info:
        tls = "--self-signed" in argv or "--certfile" in argv
        assert info["url"].startswith("https://" if tls else "http://"), info
        trace = ["run", f"{info['url']}/v1/chat/completions", "--max-tokens", "8"]
        if info.get("ca"):
            trace += ["--cacert", str(info["ca"])]
        res = run_cli(*trace)
        assert res.exit_code == 0, f"{cmd.where}: {cmd.text}\n{res.stderr}"


def _saved_series(ref: RefServer, ttft_ms: int = 0) -> str:
    """``run --count 3 --json`` of the reference endpoint: a document diff can read."""
    res = run_cli(
        "run", f"{ref.url}/v1/chat/completions", "--cacert", str(ref.ca), "--count", "3",
        "--max-tokens", "8", "--json", "-H", f"x-promptpath-ttft-ms: {ttft_ms}",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    return res.stdout


def _diff(cmd: DocCommand, ref: RefServer, tmp_path: Path) -> None:
    """``promptpath diff ...`` with the files it names made first (cwd is tmp_path): each
    ``.json`` a series of the reference endpoint, each ``.jsonl`` a watch history of such
    runs stamped inside the line's --before and --after ranges. Both sides come from one
    unchanged endpoint: the line exits 0, its headline says so, its --html is written."""
    argv = list(cmd.argv)
    options = dict(itertools.pairwise(argv))
    valued = {"--before", "--after", "--html", "--protocol"}
    files = [w for i, w in enumerate(argv[1:], 1) if argv[i - 1] not in valued and "." in w]
    runs = json.loads(_saved_series(ref))["runs"]
    for name in files:
        if name.endswith(".jsonl"):
            lines = []
            for at, window in enumerate((options["--before"], options["--after"])):
                start = window.split("-")[0]
                for seq, run in enumerate(runs, start=1 + at * len(runs)):
                    stamp = f"2026-12-06T{start}:{seq:02d}.000Z"
                    lines.append(json.dumps(
                        {"schema": "promptpath.watch/1", "seq": seq, "at": stamp, "run": run}
                    ))  # fmt: skip
            (tmp_path / name).write_text("\n".join(lines) + "\n")
        elif name.endswith(".json"):
            (tmp_path / name).write_text(_saved_series(ref))
    res = run_cli(*argv)
    assert res.exit_code == 0, f"{cmd.where}: {cmd.text}\n{res.stderr}"
    shown = res.stdout + res.stderr
    assert "SAME: No change beyond" in shown or '"exit_code": 0' in shown, shown
    if "--html" in options:
        assert (tmp_path / options["--html"]).stat().st_size > 0, "--html wrote nothing"


def _is_exporter(toml_block: str) -> bool:
    return re.search(r"^\[modules\.", toml_block, re.M) is not None


def _exporter(cmd: DocCommand, ref: RefServer, tmp_path: Path) -> None:
    """``promptpath exporter --config FILE ...`` with FILE the exporter config its page
    shows, every target pointed at the reference endpoint; --check-config passes, and a
    served one answers a probe of its first target and stops on SIGTERM with 143."""
    page = ROOT / cmd.where.split(":")[0]
    (block,) = [b for _, b in fenced(page.read_text(), "toml") if _is_exporter(b)]
    url = f"{ref.url}/v1/chat/completions"
    lines = []
    for line in block.splitlines():
        if line.startswith("url = "):
            line = f'url = "{url}"\ncacert = "{ref.ca}"'
        elif line.startswith(("resolve = ", "cacert = ")):
            continue  # the page's own pins and CAs name hosts that are not here
        lines.append(line)
    config = tmp_path / "exporter.toml"
    config.write_text("\n".join(lines) + "\n")
    argv = list(cmd.argv)
    argv[argv.index("--config") + 1] = str(config)
    if "--check-config" in argv:
        res = run_cli(*argv)
        assert res.exit_code == 0, f"{cmd.where}: {cmd.text}\n{res.stderr}"
        assert "ok," in res.stdout
        return
    from tests.helpers.exporterlab import exporter

    target = re.findall(r"^\[targets\.([\w-]+)\]", block, re.M)[0]
    extra = tuple(w for w in argv[1:] if w not in ("--config", str(config)))
    assert "--listen" not in extra, f"{cmd.where}: the test picks the port"
    with exporter(tmp_path / "exp", config.read_text(), args=extra) as running:
        status, body, _ = running.get(f"/probe?target={target}&module=chat")
        assert status == 200 and "probe_success 1" in body, body
        running.signal(signal.SIGTERM)
        assert running.process.wait(15) == 143


@contextlib.contextmanager
def _process(args: list[str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    stderr = tmp_path / "serve.stderr"
    with stderr.open("w") as err:
        process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True
        )
    try:
        info = _wait_listening(process, stderr)
        yield info
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        if process.stdout is not None:
            process.stdout.close()

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.errors import UsageError
from tests.helpers.cli import run_cli

CONFIG = """
[profiles.prod]
url = "https://api.example.com/v1/messages"
model = "claude-x"
api_key_env = "PROD_KEY"
headers = { "x-team" = "netops" }
timeout = 12.5

[profiles.inline]
url = "https://api.example.com/v1/chat/completions"
api_key = "sk-from-file"
"""


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_profile_fills_defaults_and_cli_wins(tmp_path: Path) -> None:
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, CONFIG)), "PROD_KEY": "k-env"}
    opts = build_options(RunArgs(target="prod", model="cli-model"), environ=env)
    assert opts.target.host == "api.example.com" and opts.provider == "anthropic"
    assert opts.model == "cli-model"  # the command line wins
    assert opts.timeout == 12.5 and ("x-team", "netops") in opts.headers
    assert opts.api_key == "k-env" and opts.api_key_env == "PROD_KEY"


def test_profile_api_key_needs_a_private_file(tmp_path: Path) -> None:
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, CONFIG, 0o600))}
    assert build_options(RunArgs(target="inline"), environ=env).api_key == "sk-from-file"
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, CONFIG, 0o644))}
    with pytest.raises(UsageError, match="chmod 600"):
        build_options(RunArgs(target="inline"), environ=env)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[profiles.prod]\nurl = 1\n", "wrong type"),
        ("[profiles.prod]\nmodel = 'x'\n", "no url"),
        ("[profiles.prod]\nurl = 'https://h/v1/messages'\ncolour = 'red'\n", "unknown key"),
        ("not toml ===", "cannot read config"),
        ("[profiles.other]\nurl = 'https://h/v1/messages'\n", "no profile 'prod'"),
        # tomllib recurses once per level: RecursionError, exit 70, before.
        ("[profiles.prod]\nheaders = " + "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("[profiles.prod]\nheaders = " + "{a=" * 5000 + "1" + "}" * 5000, "nested too deeply"),
        ("# " + "x" * (4 << 20) + "\n", "is larger than 4 MiB"),  # read whole before
    ],
)
def test_bad_config_is_a_usage_error_naming_the_problem(
    tmp_path: Path, text: str, match: str
) -> None:
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, text))}
    with pytest.raises(UsageError, match=match):
        build_options(RunArgs(target="prod"), environ=env)


def test_missing_config_file(tmp_path: Path) -> None:
    env = {"PROMPTPATH_CONFIG": str(tmp_path / "absent.toml")}
    with pytest.raises(UsageError, match="not a URL"):
        build_options(RunArgs(target="prod"), environ=env)


def test_an_explicit_default_on_the_command_line_still_beats_the_profile(tmp_path: Path) -> None:
    text = (
        "[profiles.p]\nurl = 'https://h/v1/messages'\ntimeout = 1\ninsecure = true\nhttp = '1.1'\n"
    )
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, text))}
    from_profile = build_options(RunArgs(target="p"), environ=env)
    assert (from_profile.timeout, from_profile.insecure, from_profile.http) == (1, True, "1.1")
    explicit = build_options(
        RunArgs(target="p", timeout=60.0, insecure=False, http="auto"), environ=env
    )
    assert (explicit.timeout, explicit.insecure, explicit.http) == (60.0, False, "auto")


def test_relative_cacert_is_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "ca").mkdir()
    ca = tmp_path / "ca" / "ca.pem"
    import trustme

    trustme.CA().cert_pem.write_to_path(str(ca))
    text = "[profiles.p]\nurl = 'https://h/v1/messages'\ncacert = 'ca/ca.pem'\n"
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, text))}
    opts = build_options(RunArgs(target="p"), environ=env)
    assert opts.cacert == str(ca)


def test_relative_cert_and_key_are_relative_to_the_config_file(tmp_path: Path) -> None:
    import trustme

    (tmp_path / "mtls").mkdir()
    leaf = trustme.CA().issue_cert("client@example.com")
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "mtls" / "client.crt"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "mtls" / "client.key"))
    text = (
        "[profiles.p]\nurl = 'https://h/v1/messages'\n"
        "cert = 'mtls/client.crt'\nkey = 'mtls/client.key'\n"
    )
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, text))}
    opts = build_options(RunArgs(target="p"), environ=env)
    assert (opts.cert, opts.key) == (
        str(tmp_path / "mtls" / "client.crt"),
        str(tmp_path / "mtls" / "client.key"),
    )


def test_cert_and_key_in_a_profile_must_be_strings(tmp_path: Path) -> None:
    text = "[profiles.p]\nurl = 'https://h/v1/messages'\ncert = 1\n"
    with pytest.raises(UsageError, match="'cert' has the wrong type"):
        build_options(
            RunArgs(target="p"), environ={"PROMPTPATH_CONFIG": str(write(tmp_path, text))}
        )


PROXY_CONFIG = """
[profiles.corp]
url = "https://api.example.com/v1/chat/completions"
proxy = "http://proxy.corp:3128"
noproxy = "internal.corp"
"""


def test_a_profiles_proxy_is_named_as_the_profiles_and_the_command_line_wins(
    tmp_path: Path,
) -> None:
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, PROXY_CONFIG)), "HTTPS_PROXY": "http://e:1"}
    opts = build_options(RunArgs(target="corp"), environ=env)
    assert opts.proxy is not None and (opts.proxy.url, opts.proxy.source) == (
        "http://proxy.corp:3128",
        "profile",
    )
    opts = build_options(RunArgs(target="corp", proxy="http://cli:8080"), environ=env)
    assert opts.proxy is not None and (opts.proxy.host, opts.proxy.source) == ("cli", "--proxy")


URL = "url = 'https://h/v1/messages'\n"


@pytest.mark.parametrize(
    ("line", "match"),
    [
        # bool is an int subclass: `timeout = true` was taken as 1 s, while
        # `max_tokens = true` was refused. Every key is now checked the same way.
        ("timeout = true", "'timeout' has the wrong type: an integer or a number, not bool"),
        ("max_tokens = true", "'max_tokens' has the wrong type: an integer, not bool"),
        ("max_tokens = 2.5", "'max_tokens' has the wrong type"),
        ("insecure = 1", "'insecure' has the wrong type: true or false, not int"),
        ("model = true", "'model' has the wrong type: a string"),
        ("headers = { x-team = 1 }", "'headers' must hold strings only"),
        ("resolve = ['h:443:127.0.0.1', 7]", "'resolve' must hold strings only"),
        ("timeout = 1e300", "'timeout' must be at most 86400 s"),
        ("timeout = -1", "'timeout' must be a positive number"),
        ("timeout = nan", "'timeout' must be a positive number"),
    ],
)
def test_every_profile_value_is_type_checked_the_same_way(
    tmp_path: Path, line: str, match: str
) -> None:
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, f"[profiles.prod]\n{URL}{line}\n"))}
    with pytest.raises(UsageError, match=re.escape(match)) as caught:
        build_options(RunArgs(target="prod"), environ=env)
    assert caught.value.kind == "bad_config"


def test_a_bool_where_a_bool_belongs_and_an_int_timeout_are_taken(tmp_path: Path) -> None:
    text = f"[profiles.prod]\n{URL}insecure = true\ntimeout = 5\n"
    env = {"PROMPTPATH_CONFIG": str(write(tmp_path, text))}
    opts = build_options(RunArgs(target="prod"), environ=env)
    assert opts.insecure is True and opts.timeout == 5.0


def test_a_config_that_is_not_utf8_is_a_usage_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"[profiles.prod]\n" + URL.encode() + b"model = 'caf\xe9'\n")
    res = run_cli("run", "prod", "--json", environ={"PROMPTPATH_CONFIG": str(path)})
    # Before: UnicodeDecodeError escaped load_profile, exit 70 (internal error).
    assert res.exit_code == 2, res.stderr
    assert "not UTF-8 (byte 0xe9 at offset 58)" in res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert json.loads(res.stdout)["error"]["kind"] == "bad_config"


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_config_that_is_no_regular_file_is_refused_unread(tmp_path: Path, kind: str) -> None:
    # A FIFO with no writer held open() for good (SIGTERM and SIGINT went unanswered);
    # /dev/zero was read until memory ran out.
    path = tmp_path / "config.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path("/dev/zero")
    env = {"PROMPTPATH_CONFIG": str(path)}
    with pytest.raises(
        UsageError,
        match=r"cannot read config .*: is a (FIFO|character device|directory), not a regular file",
    ):
        build_options(RunArgs(target="prod"), environ=env)

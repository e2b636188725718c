"""Profiles: named targets in a TOML file, so a CI job says `promptpath run prod-openai`.

File: $PROMPTPATH_CONFIG, else ~/.config/promptpath/config.toml:

    [profiles.prod-openai]
    url = "https://api.openai.com/v1/chat/completions"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"     # preferred: the key stays in the environment
    # api_key = "sk-..."               # allowed; the file must then not be group/world-readable
    headers = { "OpenAI-Organization" = "org-123" }
    http = "2"
    timeout = 30

    [profiles.prod-openai.slo]           # as --slo, the metric as the key: exit 9 on a breach
    ttft_p95 = "<800ms"
    error_rate = "<=5%"

Command-line options override profile values. Keys are never printed.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from promptpath.core.errors import UsageError
from promptpath.core.files import MAX_CONFIG_BYTES
from promptpath.options import InputFileError, check_timeout, read_input

#: Profile keys and the types they must have.
PROFILE_KEYS: dict[str, type | tuple[type, ...]] = {
    "url": str,
    "provider": str,
    "model": str,
    "prompt": str,
    "max_tokens": int,
    "api_key_env": str,
    "api_key": str,
    "headers": dict,
    "http": str,
    "cacert": str,
    "insecure": bool,
    "timeout": (int, float),
    "resolve": list,
    "resolver": str,
    "proxy": str,  # as --proxy; "" turns the environment's proxy off
    "noproxy": str,
    "as": str,  # the client shape (--as)
    "cert": str,
    "key": str,
    "slo": dict,  # metric = "<800ms" (or a list of bounds): resolve.profile_slos
}


def config_path(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("PROMPTPATH_CONFIG"):
        return Path(env["PROMPTPATH_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "promptpath" / "config.toml"


def load_profile(name: str, path: Path) -> dict[str, Any]:
    """The profile's values, type-checked; UsageError naming the file and key otherwise."""
    if not path.exists() and not path.is_symlink():
        raise UsageError(
            f"{name!r} is not a URL and there is no config file at {path} to define it",
            kind="bad_target",
        )
    data = read_toml(path)
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict) or name not in profiles:
        known = ", ".join(sorted(profiles)) if isinstance(profiles, dict) else ""
        raise UsageError(
            f"no profile {name!r} in {path} (profiles: {known or 'none'})", kind="bad_target"
        )
    profile = profiles[name]
    if not isinstance(profile, dict):
        raise UsageError(f"profile {name!r} in {path} is not a table", kind="bad_config")
    for key, value in profile.items():
        _check_value(path, name, key, value)
    if "url" not in profile:
        raise UsageError(f"{path}: profile {name!r} has no url", kind="bad_config")
    if "api_key" in profile and _too_open(path):
        raise UsageError(
            f"{path} holds an api_key but is readable by others: chmod 600 it (or use api_key_env)",
            kind="bad_config",
        )
    profile = dict(profile)
    for file_key in ("cacert", "cert", "key"):
        if file_key in profile and not Path(profile[file_key]).is_absolute():
            # Relative to the config file, not to wherever a cron job happens to run.
            profile[file_key] = str(path.parent / profile[file_key])
    return profile


#: Keys whose values are tables or arrays of strings (headers, --resolve, probe names).
_STRING_ITEMS = ("headers", "resolve", "probes", "modules")


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables; UsageError (bad_config) naming the file when it cannot be read:
    not a regular file, past MAX_CONFIG_BYTES, not UTF-8, not TOML, or nested deeper than
    the parser's recursion goes (tomllib recurses per level of nesting)."""
    try:
        return tomllib.loads(_read_utf8(path))
    except (InputFileError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read config {path}: {exc}", kind="bad_config") from exc
    except RecursionError:
        raise UsageError(
            f"cannot read config {path}: arrays or tables nested too deeply", kind="bad_config"
        ) from None


def _read_utf8(path: Path) -> str:
    """The file's text: TOML is UTF-8 (and a UnicodeDecodeError is no OSError)."""
    raw = read_input(path, MAX_CONFIG_BYTES)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise tomllib.TOMLDecodeError(
            f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None


def _type_name(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    names.update({dict: "a table", list: "an array"})
    return " or ".join(names.get(t, t.__name__) for t in types)


def _has_type(value: object, expected: type | tuple[type, ...]) -> bool:
    """isinstance, except that a bool is only a bool: True is an int subclass in Python,
    and ``timeout = true`` must not be taken as 1 s."""
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def _check_value(path: Path, name: str, key: str, value: object) -> None:
    """One profile value: a known key, of its type, the same check for every key."""
    check_value(path, f"profile {name!r}", key, value, PROFILE_KEYS)


def check_value(
    path: Path,
    what: str,
    key: str,
    value: object,
    keys: Mapping[str, type | tuple[type, ...]],
) -> None:
    """One value of a table of ``keys`` (a profile, an exporter module or target): a
    known key, of its type; ``what`` names the table in the message."""
    expected = keys.get(key)
    if expected is None:
        raise UsageError(f"{path}: {what} has unknown key {key!r}", kind="bad_config")
    where = f"{path}: {what} key {key!r}"
    if not _has_type(value, expected):
        raise UsageError(
            f"{where} has the wrong type: {_type_name(expected)}, not {type(value).__name__}",
            kind="bad_config",
        )
    if key in _STRING_ITEMS:
        items = list(value.values()) if isinstance(value, dict) else value
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise UsageError(f"{where} must hold strings only", kind="bad_config")
    if key == "timeout":
        assert isinstance(value, int | float)
        try:
            check_timeout(value, flag=where)
        except UsageError as exc:
            raise UsageError(exc.message, kind="bad_config") from None


def _too_open(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))

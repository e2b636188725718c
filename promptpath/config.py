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
from pathlib import Path
from typing import Any

from promptpath.core.errors import UsageError

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
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise UsageError(
            f"{name!r} is not a URL and there is no config file at {path} to define it",
            kind="bad_target",
        ) from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read config {path}: {exc}", kind="bad_config") from exc
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
        expected = PROFILE_KEYS.get(key)
        if expected is None:
            raise UsageError(f"{path}: profile {name!r} has unknown key {key!r}", kind="bad_config")
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise UsageError(
                f"{path}: profile {name!r} key {key!r} has the wrong type", kind="bad_config"
            )
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


def _too_open(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))

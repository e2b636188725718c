"""AWS credentials and region for a Bedrock run, found where botocore looks for them.

botocore (the ``[bedrock]`` extra) reads them: the standard variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), then the shared
credentials file and the config file (``AWS_SHARED_CREDENTIALS_FILE``, ``AWS_CONFIG_FILE``,
default ``~/.aws/…``) for the profile ``AWS_PROFILE`` names (``default`` otherwise), in
botocore's order. Only the sources that are files or variables: the ones that would call
out (instance metadata, containers, SSO, assumed roles, web identity) are left out, since a
diagnostic run sends nothing to any host but its target; export their temporary keys
(``aws configure export-credentials --format env``) to use them.

The region: from the host name (``bedrock-runtime.REGION.amazonaws.com``), else
``AWS_REGION``, else ``AWS_DEFAULT_REGION`` (the one botocore reads), else the profile's
``region``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from promptpath.core.errors import UsageError
from promptpath.dialects.bedrock import region_from_host
from promptpath.options import AwsCredentials

__all__ = ["EXTRA_HINT", "load_credentials"]

EXTRA_HINT = (
    "signing a Bedrock request (SigV4) needs botocore: pip install 'promptpath[bedrock]',"
    " or set AWS_BEARER_TOKEN_BEDROCK to use a Bedrock API key"
)


def _files(env: Mapping[str, str]) -> tuple[str, str, str]:
    # The run's own environment decides, even HOME: an environment without it (a test's,
    # a bare service) reads no default files rather than the process owner's.
    home = env.get("HOME")

    def path(variable: str, default: str) -> str:
        given = env.get(variable)
        if given:
            return os.path.join(home, given[2:]) if home and given.startswith("~/") else given
        return os.path.join(home, ".aws", default) if home else os.devnull

    profile = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    creds = path("AWS_SHARED_CREDENTIALS_FILE", "credentials")
    return creds, path("AWS_CONFIG_FILE", "config"), profile


def _profile_region(config_file: str, profile: str) -> str | None:
    from botocore.configloader import load_config
    from botocore.exceptions import BotoCoreError

    try:
        profiles: dict[str, Any] = load_config(config_file).get("profiles", {})
    except (BotoCoreError, OSError, ValueError):
        return None
    region = profiles.get(profile, {}).get("region")
    return region if isinstance(region, str) and region else None


def load_credentials(env: Mapping[str, str], host: str) -> AwsCredentials | None:
    """The run's SigV4 credentials, or None when no source holds any.

    A UsageError when botocore is not installed, or when keys are found but no region."""
    try:
        from botocore.credentials import (
            ConfigProvider,
            CredentialResolver,
            EnvProvider,
            SharedCredentialProvider,
        )
        from botocore.exceptions import BotoCoreError
    except ImportError as exc:
        raise UsageError(EXTRA_HINT, kind="bad_option") from exc
    creds_file, config_file, profile = _files(env)
    resolver = CredentialResolver(
        [
            EnvProvider(environ=dict(env)),
            SharedCredentialProvider(creds_file, profile),
            ConfigProvider(config_file, profile),
        ]
    )
    try:
        found = resolver.load_credentials()
    except BotoCoreError as exc:  # a partial set (a key id without its secret), a bad file
        raise UsageError(f"AWS credentials: {exc}", kind="bad_config") from exc
    if found is None:
        return None
    frozen = found.get_frozen_credentials()
    region = (
        region_from_host(host)
        or env.get("AWS_REGION")
        or env.get("AWS_DEFAULT_REGION")
        or _profile_region(config_file, profile)
    )
    if not region:
        raise UsageError(
            "no AWS region for SigV4: the host does not name one"
            " (bedrock-runtime.REGION.amazonaws.com); set AWS_REGION",
            kind="bad_option",
        )
    return AwsCredentials(
        access_key=frozen.access_key,
        secret_key=frozen.secret_key,
        token=frozen.token or None,
        region=region,
        source=str(getattr(found, "method", "") or "botocore"),
    )

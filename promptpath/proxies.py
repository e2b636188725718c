"""Which forward proxy a request goes through, the way curl and httpx decide it. Pure.

Sources, first match wins: ``--proxy`` (or a profile's ``proxy``), then the environment:
``https_proxy``/``HTTPS_PROXY`` for an https:// target, ``http_proxy``/``HTTP_PROXY`` for an
http:// one, then ``all_proxy``/``ALL_PROXY`` (the lower-case spelling first, as both tools
read it). ``--noproxy`` or ``no_proxy``/``NO_PROXY`` bypass the proxy for matching hosts:
``*``, a host name (its subdomains too; a leading dot is optional), an IP address, or a
CIDR range. Credentials in the proxy URL (or ``--proxy-user``) become a Basic
``Proxy-Authorization`` header for the proxy only; they are never printed.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote, urlsplit

from promptpath.core.addr import wire_host
from promptpath.core.errors import UsageError

ProxyScheme = Literal["http", "https"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyChoice:
    """The proxy a run goes through, and why."""

    scheme: ProxyScheme
    host: str
    port: int
    source: str  # "--proxy", "profile", or the environment variable's name
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The proxy URL without credentials: safe to print."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def authorization(self) -> str | None:
        """The ``Proxy-Authorization`` value (Basic), or None without credentials."""
        if self.username is None:
            return None
        pair = f"{self.username}:{self.password or ''}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


def parse_proxy_url(url: str, *, source: str, user: str | None = None) -> ProxyChoice:
    """A proxy URL as curl takes it (``host:port`` alone means http://); clear errors."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"{source}: not a valid proxy URL ({exc})", kind="bad_option") from exc
    scheme = parts.scheme.lower()
    if scheme.startswith("socks"):
        raise UsageError(
            f"{source}: {scheme}:// proxies are not supported; promptpath speaks to HTTP and"
            " HTTPS proxies (CONNECT)",
            kind="bad_option",
        )
    if scheme not in ("http", "https"):
        raise UsageError(
            f"{source}: proxy scheme {scheme!r} is not supported (use http:// or https://)",
            kind="bad_option",
        )
    if not parts.hostname:
        raise UsageError(f"{source}: the proxy URL has no host", kind="bad_option")
    try:
        host = wire_host(parts.hostname)
    except ValueError as exc:
        raise UsageError(f"{source}: the proxy host name {exc}", kind="bad_option") from None
    if parts.path not in ("", "/") or parts.query:
        raise UsageError(
            f"{source}: a proxy URL is scheme://host:port, without a path", kind="bad_option"
        )
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    if user is not None:
        username, _, password = user.partition(":")
    proxy_scheme: ProxyScheme = "https" if scheme == "https" else "http"
    return ProxyChoice(
        scheme=proxy_scheme,
        host=host,
        port=port or (443 if scheme == "https" else 1080),  # curl's defaults
        source=source,
        username=username,
        password=password,
    )


def _env(environ: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """The lower-case spelling first, as curl and urllib read them; empty means unset."""
    for key in (name.lower(), name.upper()):
        value = environ.get(key, "").strip()
        if value:
            return key, value
    return None


def no_proxy_matches(host: str, entries: str) -> bool:
    """Whether ``host`` is bypassed by a no_proxy list (curl's rules, plus CIDR ranges)."""
    host = host.strip("[]").lower().rstrip(".")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in entries.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        entry = entry.strip("[]")
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name = entry.lstrip(".").rstrip(".")
        if host == name or host.endswith("." + name):
            return True
    return False


def select_proxy(
    target_scheme: str,
    target_host: str,
    *,
    flag: str | None,
    flag_source: str = "--proxy",
    noproxy: str | None,
    user: str | None,
    environ: Mapping[str, str],
) -> tuple[ProxyChoice | None, str | None]:
    """The proxy for this target and a note on the choice (why none, when one was bypassed)."""
    if flag is not None:
        if flag.strip() == "":
            return None, f'{flag_source} "" turns the proxy off'
        chosen: tuple[str, str] | None = (flag_source, flag)
    else:
        wanted = "https_proxy" if target_scheme == "https" else "http_proxy"
        chosen = _env(environ, wanted) or _env(environ, "all_proxy")
    if chosen is None:
        return None, None
    source, url = chosen
    bypass = noproxy if noproxy is not None else (_env(environ, "no_proxy") or ("", ""))[1]
    if bypass and no_proxy_matches(target_host, bypass):
        which = "--noproxy" if noproxy is not None else "NO_PROXY"
        return None, f"{source} bypassed: {target_host} matches {which}"
    return parse_proxy_url(url, source=source, user=user), None


__all__ = ["ProxyChoice", "no_proxy_matches", "parse_proxy_url", "select_proxy"]

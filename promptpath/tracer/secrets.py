"""Which values of a run are credentials: what no output may show, in any spelling."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from promptpath.options import RunOptions, is_secret_query
from promptpath.tracer.request import is_secret_header


def secret_values(options: RunOptions) -> list[str]:
    """The key, credential headers and query values, and the proxy's credentials (its
    ``Proxy-Authorization`` value, its Basic token, ``user:password`` and the password)."""
    values = [options.api_key] if options.api_key else []
    for name, value in options.headers:
        if is_secret_header(name) and value:
            values.append(value)
            values.append(value.split(" ", 1)[-1])  # "Bearer sk-..." → also the bare token
    query = urlsplit(options.target.url).query
    values.extend(v for k, v in parse_qsl(query, keep_blank_values=True) if is_secret_query(k))
    proxy = options.proxy
    if proxy is not None and proxy.authorization is not None:
        values.append(proxy.authorization)
        values.append(proxy.authorization.split(" ", 1)[-1])  # the Basic token
        if proxy.password:
            values.append(proxy.password)
            values.append(f"{proxy.username}:{proxy.password}")
    return [v for v in values if v]


__all__ = ["secret_values"]

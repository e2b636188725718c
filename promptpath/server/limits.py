"""Bounds of the ``serve`` options that are not behaviour controls, shared by the command
line (declared to typer, so a bad value is a usage error) and ``runner._prepare`` (which
also guards callers of ``ServerConfig`` such as ``promptpath demo``)."""

from __future__ import annotations

PORT_MAX = 65_535
#: A century either way: far inside what ``datetime`` arithmetic and an X.509 validity
#: can hold (``--cert-days 3000000`` overflowed the year 9999).
CERT_DAYS_MAX = 36_500

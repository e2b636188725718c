"""The API dialects, one plug-in per API.

``registry.py`` names them (cheap: ``--help`` reads it); each folder ``<name>/`` is one
API's plug-in: its ``SPEC`` (``spec.py``) holds side by side how a URL names it, its keys,
its model, the request and client its SDK sends, and its stream decoder, and
``emulation.py`` beside it is the reference endpoint's emulation (loaded only by the
server). ``plugins.py`` loads the plug-ins by name and finds the one a path names.
``stream.py`` binds a decoder to its framing (``streams/``: SSE, NDJSON, AWS event stream,
WebSocket messages); ``sniff.py`` names the dialect a body really speaks.

A decoder turns one framed message into zero or more ``StreamEvent``. The distinction that
matters for timing is ``kind="content"``: text, reasoning/thinking, or a tool-call delta
the model produced. Role-only chunks, ``message_start``, pings and finish reasons are
``meta`` and never count as a token. Payload shapes are read defensively: a field of the
wrong type is treated as absent, because a diagnostics tool must describe a strange
stream, not crash on it. Only data that is not a JSON object at all raises
``MalformedEvent``.
"""

"""The reference endpoint: a streaming AI API whose behaviour we control.

    command.py     ``serve(ctx, **values)``: ``promptpath serve`` and ``python -m
                   promptpath.server``, declared from its tables (a flag per control)
    controls.py    every behaviour control once: flag, x-promptpath-* header, body field, docs row
    hosting.py     ServerConfig, serve_forever, start_in_thread -> ServerHandle (hypercorn, lazily)
    app.py         ReferenceApp: the ASGI app (routing, auth, controls, /stats, /healthz)
    streaming.py   the paced writer, write_stream(ex, StreamSpec, ...): deadlines, keepalives,
                   batching, truncation, disconnects
    behaviour.py   Behaviour (frozen); from_request(defaults, headers, body): x-promptpath-*
                   controls and the body's "promptpath" object (a header wins), and applied()
    dialect.py     Dialect (what every emulation implements), Event, framing, the send stamp
                   {"promptpath": {"seq", "sent_unix_ns"}} (the first event's stamp also
                   reports the controls applied)
    routing.py     which emulation answers a path: each dialect's plug-in holds its own
                   (promptpath/dialects/<name>.py, ``SPEC.emulation``)
    websocket.py   the WebSocket side, for the dialects that speak it
    certs.py       make_self_signed(dir, ...) -> CertPaths (cryptography, lazily)
    limits.py      bounds of --port and --cert-days (typer and ServerConfig share them)

Nothing here imports hypercorn, aioquic or cryptography at module level.
"""

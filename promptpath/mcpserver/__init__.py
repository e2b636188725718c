"""`promptpath mcp`: promptpath's main jobs as MCP tools, for an AI assistant, with the
guarantees a person gets on the command line (docs/mcp.md).

- tools.py: the tool table, each input schema made from the CLI's option table (pure);
- jobs.py: one connection's Session: the allow-list, the spend limit, the runs;
- server.py: the official MCP SDK over stdio (the ``mcp`` extra, imported only here);
- run.py: the command: the config loaded, the SDK checked for, the server served.
"""

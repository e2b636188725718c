"""The only code that touches sockets."""

"""The tracer: one orchestrator that drives every transport through the same stages.

``trace`` (orchestrator.py) resolves, connects through a ``promptpath.net`` transport, sends
the request shaped by request.py, and feeds the body to ingest.py, which turns bytes
into events on the Timeline; h3discovery.py reads what a TCP run says about HTTP/3.
"""

from promptpath.tracer.orchestrator import Tracer, new_timeline, trace, trace_pair

__all__ = ["Tracer", "new_timeline", "trace", "trace_pair"]

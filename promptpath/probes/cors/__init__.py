"""The ``cors`` probe: one preflight and the traced response's headers, judged."""

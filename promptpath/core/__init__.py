"""The pure core: data, errors, statistics, metrics and comparisons.

Nothing here reads a socket or a clock: stamps come in as arguments (``perf_counter_ns``
readings taken by ``promptpath.net``), so every function can be tested with made-up
timelines. Modules: ``timeline`` (the data model every step appends to), ``errors`` and
``exitcodes`` (the failure contract), ``findings`` (probe verdicts as data), ``stats``,
``analysis`` (metrics from a timeline) and ``differences`` (two sides' runs, metric by
metric, against a noise floor: HTTP/2 against HTTP/3).
"""

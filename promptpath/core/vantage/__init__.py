"""`promptpath vantage`, pure: the PromQL it asks, the table it builds, the standout it names.

queries.py  the selection (--by, --target, --module, --since) as PromQL instant queries
table.py    Prometheus' answers (vectors) into one vantage × stage table
judge.py    which vantage and stage stand out, against the fleet's own spread and the
            practical floors of the diff's metric table (core/change/metrics.py)

No socket, no clock: net/promapi.py asks Prometheus, cli/vantage.py wires them.
"""

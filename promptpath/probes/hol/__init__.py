"""The ``hol`` probe: head-of-line blocking across streams of one connection."""

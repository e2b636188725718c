"""Where a report goes: files written atomically, a Pushgateway, an OTLP collector.

The plan storey reads the destinations checked here before the first packet; the
renderers in report/ are imported only when a format is written."""

"""`promptpath exporter`: a blackbox_exporter-style service that Prometheus scrapes.

config.py   the TOML config: modules, targets (the allow-list), the guard's limits
guard.py    the cost guard, sans-IO: minimum interval, probes in flight, token budget
probe.py    one probe (the module's trace and probes) inside the scrape's deadline
metrics.py  a probe's answer and the exporter's own health, as Prometheus text
process.py  the process' figures (descriptors, memory, CPU, tasks)
http.py     a small HTTP/1.1 server on h11 and anyio
service.py  the routes: /probe, /metrics, /-/reload, /-/healthy, /-/ready
log.py      one JSON line per probe (and reload, refusal) on stderr
run.py      listen, serve, SIGHUP reloads, SIGTERM drains
"""

"""The faces: the console script, the Typer commands and what each runs (run, probe, demo,
serve, exporter), and the start-up plumbing only the console script uses."""

"""The edges probe: every address and alternative of the target timed, the edge named."""

"""promptpath: network-path diagnostics for streaming AI APIs."""

__version__ = "0.1.0"

__all__ = ["__version__"]

"""Presentation: terminal (rich) and JSON reporters."""

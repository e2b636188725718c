"""The API dialects, one plug-in per API: the client and the reference endpoint's halves."""

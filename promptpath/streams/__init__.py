"""Sans-IO stream decoders: bytes and timestamps in, events out."""

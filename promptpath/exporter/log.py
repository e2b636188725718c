"""One JSON object per line on stderr: what the exporter did (each probe, reloads, refusals).

Values that came from the network (an error message a server wrote) reach here already
redacted by the run's Redactor; json.dumps escapes every control character, so a log line
is always one line of ASCII.
"""

from __future__ import annotations

import json
import time
from typing import IO, Any


class JsonLog:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps(
            {"ts": round(time.time(), 3), "event": event, **fields},
            ensure_ascii=True,
            default=str,
        )
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed stderr must not take the exporter down


__all__ = ["JsonLog"]

"""Log formats for ``conveyor worker``: the usual text lines, or one JSON object per line
for log shippers (``--log-format json``)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any

FORMATS = ("text", "json")
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Fields a record may carry beside its message (the worker's failed attempts do).
EXTRA_FIELDS = ("job_id", "task", "attempt", "max_attempts", "next")


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...}``: the message is one line; a
    traceback (of a failed attempt or a logged exception) is a field of its own."""

    def format(self, record: logging.LogRecord) -> str:
        message = getattr(record, "headline", None) or record.getMessage()
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": message,
        }
        for name in EXTRA_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = value
        trace = getattr(record, "traceback", None)
        if record.exc_info:
            trace = self.formatException(record.exc_info)
        if trace:
            out["traceback"] = trace
        return json.dumps(out, default=str)


def configure(level: str, fmt: str = "text") -> None:
    """Send the process's logs to stderr at ``level``, as ``fmt`` (text or json)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if level.lower() != "debug":
        # The HTTP client logs every request at INFO (a remote worker polls all the
        # time): worth seeing only when debugging.
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)

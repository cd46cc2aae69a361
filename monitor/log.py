"""One structured log format for every process: a JSON object per line on stdout.

supervisord captures stdout into ``$MONITOR_HOME/log``; ``jq`` reads it.
Usage: ``log = get_logger("worker"); log.info("fetched", url=..., links=12)``.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time

from monitor.config import LOG_LEVELS


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "proc": record.name,
            "pid": record.process,
            "event": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(entry, ensure_ascii=False, default=str)


class EventLogger:
    """A thin wrapper so call sites read ``log.info("event", key=value)``."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    def _log(self, level: int, event: str, fields: dict, exc_info: bool = False) -> None:
        self._logger.log(level, event, extra={"fields": fields}, exc_info=exc_info)

    def info(self, event: str, **fields: object) -> None:
        self._log(logging.INFO, event, fields)

    def warning(self, event: str, **fields: object) -> None:
        self._log(logging.WARNING, event, fields)

    def error(self, event: str, exc_info: bool = False, **fields: object) -> None:
        self._log(logging.ERROR, event, fields, exc_info=exc_info)


def describe(exc: BaseException, limit: int = 300) -> str:
    """An exception as the short one-line reason logs and statuses show."""
    return f"{type(exc).__name__}: {exc}"[:limit]


_configured = False


def get_logger(name: str) -> EventLogger:
    """Return a logger writing JSON lines to stdout (level from ``MONITOR_LOG_LEVEL``, default info)."""
    global _configured
    if not _configured:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(JsonFormatter())
        root = logging.getLogger()
        root.handlers[:] = [handler]
        level = os.environ.get("MONITOR_LOG_LEVEL", "info").lower()
        # monitor.config refuses a bad level (one place checks settings); never crash on one here.
        root.setLevel(level.upper() if level in LOG_LEVELS else "INFO")
        # pika logs every reconnect attempt at length; our own events say what matters.
        logging.getLogger("pika").setLevel(logging.CRITICAL)
        _configured = True
    return EventLogger(name)

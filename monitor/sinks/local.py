"""The processor's own alert sinks: where a new link is recorded as it is made durable.

A sink has a ``name``, ``deliver(alerts)`` and ``delivered(alert_ids)``. The processor calls
``delivered`` only when it re-applies an outbox record after a crash, to skip the alerts a
sink already has; so each alert reaches a sink that can answer exactly once, and a sink
that cannot (the log) at least once. Register a new sink in ``SINKS``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Protocol

from monitor.config import Config
from monitor.log import get_logger
from monitor.messages import Alert


class Sink(Protocol):
    name: str

    def deliver(self, alerts: list[Alert]) -> None: ...

    def delivered(self, alert_ids: set[str]) -> set[str]: ...


class JsonLinesSink:
    """Appends one JSON object per alert to ``$MONITOR_HOME/alerts.jsonl`` (fsynced). Past
    ``max_bytes`` the file becomes ``alerts.jsonl.1`` (the previous ``.1`` goes) and a new
    one starts, so the file never grows without bound."""

    name = "jsonl"

    def __init__(self, path: Path, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = path
        self.previous = path.with_name(path.name + ".1")
        self.max_bytes = max_bytes
        path.parent.mkdir(parents=True, exist_ok=True)

    def deliver(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        try:
            if self.path.stat().st_size >= self.max_bytes:
                os.replace(self.path, self.previous)
        except FileNotFoundError:
            pass
        data = b"".join(alert.to_bytes() + b"\n" for alert in alerts)
        if self._tail_is_torn():
            data = b"\n" + data  # a line cut by a crash must not swallow the next one
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:  # one write() in practice, so a killed process leaves whole lines
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def _tail_is_torn(self) -> bool:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(-1, os.SEEK_END)
                return handle.read(1) != b"\n"
        except OSError:  # missing or empty file
            return False

    def delivered(self, alert_ids: set[str]) -> set[str]:
        """Those of ``alert_ids`` in the file or the one before it (an outbox record being
        re-applied holds recent alerts only)."""
        found = set()
        for path in (self.previous, self.path):
            if not path.exists():
                continue
            with open(path, "rb") as handle:
                for line in handle:
                    try:
                        alert_id = json.loads(line).get("alert_id")
                    except ValueError:
                        continue  # a line torn by a crash mid-write
                    if alert_id in alert_ids:
                        found.add(alert_id)
        return found


class LogSink:
    """Writes each alert as a structured log line (captured by supervisord)."""

    name = "log"

    def __init__(self) -> None:
        self.log = get_logger("alerts")

    def deliver(self, alerts: list[Alert]) -> None:
        for alert in alerts:
            self.log.info("new link", **alert.as_dict())

    def delivered(self, alert_ids: set[str]) -> set[str]:
        return set()  # a log cannot be searched back cheaply; a crash may repeat a line


SINKS = {"jsonl": lambda config: JsonLinesSink(config.alerts_path), "log": lambda config: LogSink()}


def build_sinks(config: Config, names: Iterable[str] = ("jsonl", "log")) -> list[Sink]:
    """Instantiate the configured sinks by name."""
    return [SINKS[name](config) for name in names]

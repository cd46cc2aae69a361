"""Which of a worker's jobs may start now: many at once, but never two for the same host.

A worker holds up to ``worker_concurrency`` jobs (the prefetch window) and fetches them in
parallel threads; jobs for a host that is being fetched wait here, in arrival order, and
start when the previous one finishes (the politeness delay is then applied per exit).
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

Item = TypeVar("Item")


class HostQueues(Generic[Item]):
    """One job in flight per host; the others wait in a per-host FIFO. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, deque[Item]] = {}  # a key exists while the host is busy

    def admit(self, host: str, item: Item) -> bool:
        """True when ``item`` may start now; otherwise it waits for :meth:`done`."""
        with self._lock:
            if host in self._waiting:
                self._waiting[host].append(item)
                return False
            self._waiting[host] = deque()
            return True

    def done(self, host: str) -> Item | None:
        """The host's job finished: the next item for it, which may start now, or None."""
        with self._lock:
            waiting = self._waiting.get(host)
            if waiting:
                return waiting.popleft()
            self._waiting.pop(host, None)
            return None

    def waiting(self) -> int:
        with self._lock:
            return sum(len(queue) for queue in self._waiting.values())

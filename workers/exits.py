"""A worker's exits (leased proxies, or the direct connection), rotated as the VPN patent says.

* Use the least recently used exit.
* On a refusal, flag the exit as recently used and switch to the least recently used exit
  not flagged; when every exit is flagged, lease one more from the controller; when none
  is left, the host goes into cooldown. A success clears the flags.
* With no proxies configured at all, the one exit is the direct connection, and a refusal
  puts the host into cooldown at once.

Also here: the shared host disable list (:class:`Cooldowns`) and the per-exit politeness
delay (:class:`Politeness`). Nothing here talks to the network: the lease function is given.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from monitor.messages import LeaseReply
from monitor.urls import redact


@dataclass
class Exit:
    """One way out: a leased proxy (``id``, ``url``) or the direct connection (both None)."""
    id: int | None
    url: str | None
    started_at: float = field(default_factory=time.time)
    last_used: float = 0.0
    recently_used: bool = False
    # Counters since the last heartbeat (the controller adds them to the pool's totals).
    requests: int = 0
    refusals: int = 0
    last_error: str | None = None

    @property
    def name(self) -> str:
        return "direct" if self.url is None else redact(self.url)

    def report(self) -> dict:
        """Counters for the heartbeat; reset once taken."""
        counters = {"id": self.id, "requests": self.requests, "refusals": self.refusals, "last_error": self.last_error}
        self.requests = self.refusals = 0
        self.last_error = None
        return counters


Lease = Callable[[int, list[int]], LeaseReply]


class ExitPool:
    """The exits a worker holds, and the rotation rules above."""

    RECHECK_DIRECT = 60.0  # seconds between asking, while fetching directly, whether proxies appeared

    def __init__(self, lease: Lease, initial: int = 2, clock: Callable[[], float] = time.monotonic) -> None:
        self._lease = lease
        self.initial = initial
        self.clock = clock
        self.exits: list[Exit] = []
        self.direct = False
        self.leased_at = 0.0
        self.disabled_hosts: dict[str, float] = {}

    def _take(self, reply: LeaseReply) -> int:
        self.leased_at = self.clock()
        self.disabled_hosts.update(reply.disabled_hosts)
        if reply.pool_size == 0:
            if not self.exits:
                self.direct = True
                self.exits.append(Exit(None, None))
            return 0
        if self.direct:  # proxies were added to the pool: stop fetching directly
            self.direct = False
            self.exits.clear()
        self.exits.extend(Exit(proxy["id"], proxy["url"]) for proxy in reply.proxies)
        return len(reply.proxies)

    def ensure(self) -> None:
        """Lease the initial exits (raises whatever the lease function raises); while fetching
        directly, ask again now and then whether the pool has proxies now."""
        if not self.exits or (self.direct and self.clock() - self.leased_at > self.RECHECK_DIRECT):
            self._take(self._lease(self.initial, []))

    def pick(self) -> Exit | None:
        """The least recently used exit not flagged, or None when every exit is flagged."""
        candidates = [exit for exit in self.exits if not exit.recently_used]
        return min(candidates, key=lambda exit: exit.last_used) if candidates else None

    def lease_more(self) -> bool:
        """Ask the controller for one more proxy; False when the pool has none to give."""
        if self.direct:
            return False
        return self._take(self._lease(1, [exit.id for exit in self.exits])) > 0

    def used(self, exit: Exit) -> None:
        exit.last_used = time.time()
        exit.requests += 1

    def refused(self, exit: Exit, reason: str) -> None:
        exit.recently_used = True
        exit.refusals += 1
        exit.last_error = reason

    def succeeded(self) -> None:
        for exit in self.exits:
            exit.recently_used = False

    def proxy_ids(self) -> list[int]:
        return [exit.id for exit in self.exits if exit.id is not None]

    def report(self) -> list[dict]:
        return [exit.report() for exit in self.exits if exit.id is not None]


class Cooldowns:
    """The shared host disable list: ``{host: until}``. Thread-safe (its own lock, so the
    thread that receives announcements never waits for a lease in progress)."""

    def __init__(self, longest: float = 7200.0) -> None:
        self.until: dict[str, float] = {}
        self.longest = longest  # no announcement disables a host for longer than this from now
        self._lock = threading.Lock()

    def disable(self, host: str, until: float) -> None:
        until = min(until, time.time() + self.longest)
        with self._lock:
            self.until[host] = max(until, self.until.get(host, 0.0))

    def update(self, hosts: dict[str, float]) -> None:
        for host, until in hosts.items():
            self.disable(host, until)

    def disabled_until(self, host: str, now: float | None = None) -> float | None:
        """When ``host`` may be fetched again, or None if it may be now."""
        with self._lock:
            until = self.until.get(host)
            if until is None or until <= (time.time() if now is None else now):
                self.until.pop(host, None)
                return None
            return until


class Politeness:
    """Spaces requests to the same host through the same exit by ``delay`` seconds."""

    def __init__(self, delay: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.delay = delay
        self.sleep = sleep
        self.last: dict[tuple[str, str], float] = {}

    def wait(self, exit: Exit, host: str) -> None:
        key = (exit.name, host)
        due = self.last.get(key, 0.0) + self.delay
        now = time.monotonic()
        if due > now:
            self.sleep(due - now)
        self.last[key] = time.monotonic()
        if len(self.last) > 10_000:  # forget hosts whose delay has long passed
            horizon = time.monotonic() - self.delay
            self.last = {key: at for key, at in self.last.items() if at > horizon}

"""A worker's exits (leased proxies, or the direct connection), rotated as the VPN patent says.

* Use the least recently used exit the job has not tried yet.
* When the site refuses the requester (403, 429, 503) through an exit, try the next one;
  when the job has tried every exit the worker holds, ask the controller for one more for
  that host. The controller sees the whole fleet: it grants an exit the host has not
  refused recently, or, when every exit of the pool has been refused by that host,
  disables the host fleet-wide (the job then ends ``skipped``). A worker never disables a
  host on its own: "none of *my* exits is left" is not "the host refused every exit".
* A proxy that fails itself (unreachable, 407, CONNECT refused) is dropped and reported at
  once, with a request for a replacement; the controller grants it to nobody for a while.
* A worker holds at most ``cap`` exits between jobs: extra ones leased for a job go back
  (least recently used first) once it is done. Exits may be shared between workers: an
  HTTP proxy serves many connections, and sharing keeps every worker working when there
  are fewer proxies than workers.
* With no proxies configured at all, the one exit is the direct connection (id 0 in what
  the controller hears), and the same rules apply.

Also here: the shared host disable list (:class:`Cooldowns`) and the per-exit politeness
delay (:class:`Politeness`). Nothing here talks to the network: the lease function is given.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from monitor.messages import DIRECT, LeaseReply
from monitor.urls import redact


@dataclass(eq=False)
class Exit:
    """One way out: a leased proxy (``id``, ``url``) or the direct connection (``DIRECT``, None)."""
    id: int
    url: str | None
    started_at: float = field(default_factory=time.time)
    last_used: float = 0.0
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


class Control(Protocol):
    """What a worker asks the controller (:class:`workers.control.ControlLink`)."""

    def lease(self, count: int, exclude: list[int], host: str | None = None, refused: list[int] | None = None,
              broken: list[int] | None = None) -> LeaseReply: ...

    def release(self, proxy_ids: list[int] | None = None) -> None: ...


class ExitPool:
    """The exits a worker holds, and the rotation rules above."""

    RECHECK_DIRECT = 60.0  # seconds between asking, while fetching directly, whether proxies appeared

    def __init__(self, control: Control, cap: int = 2, clock: Callable[[], float] = time.monotonic,
                 cooldowns: "Cooldowns | None" = None) -> None:
        self.control = control
        self.cap = cap
        self.clock = clock
        self.cooldowns = cooldowns or Cooldowns()  # every lease reply's disable list goes there
        self.exits: list[Exit] = []
        self.direct = False
        self.leased_at = 0.0
        self.broken: list[int] = []  # proxies dropped since the last lease request: reported with it
        self.retired: list[Exit] = []  # dropped exits whose counters the next heartbeat still carries

    def _take(self, reply: LeaseReply) -> LeaseReply:
        self.leased_at = self.clock()
        self.broken.clear()
        self.cooldowns.update(reply.disabled_hosts)
        if reply.pool_size == 0:
            if not self.direct:
                self.direct = True
                self.exits = [Exit(DIRECT, None)]
            return reply
        if self.direct:  # proxies were added to the pool: stop fetching directly
            self.direct = False
            self.exits.clear()
        held = {exit.id for exit in self.exits}
        self.exits.extend(Exit(proxy["id"], proxy["url"]) for proxy in reply.proxies if proxy["id"] not in held)
        return reply

    def _held_proxies(self) -> list[int]:
        return [exit.id for exit in self.exits if exit.id != DIRECT]

    def ensure(self) -> None:
        """Lease the first exits (raises whatever the lease function raises); while fetching
        directly, ask again now and then whether the pool has proxies now."""
        if not self.exits or (self.direct and self.clock() - self.leased_at > self.RECHECK_DIRECT):
            self._take(self.control.lease(self.cap, self._held_proxies(), broken=list(self.broken)))

    def pick(self, tried: set[int]) -> Exit | None:
        """The least recently used exit not in ``tried`` (exit ids), or None."""
        candidates = [exit for exit in self.exits if exit.id not in tried]
        return min(candidates, key=lambda exit: exit.last_used) if candidates else None

    def more(self, host: str, refused: list[int]) -> LeaseReply:
        """Ask the controller for one more exit for ``host``, which refused the exits
        ``refused``; the reply's ``disabled_hosts`` holds ``host`` if the controller
        found that every exit of the pool was refused by it."""
        return self._take(self.control.lease(1, self._held_proxies(), host=host, refused=refused,
                                             broken=list(self.broken)))

    def used(self, exit: Exit) -> None:
        exit.last_used = time.time()
        exit.requests += 1

    def refused(self, exit: Exit, reason: str) -> None:
        exit.refusals += 1
        exit.last_error = reason

    def failed(self, exit: Exit, reason: str) -> None:
        """The proxy itself failed: stop using it, tell the controller (which will not grant
        it for a while) and take a replacement if there is one."""
        exit.last_error = reason
        if exit in self.exits and exit.id != DIRECT:
            self.exits.remove(exit)
            self.retired.append(exit)
            self.broken.append(exit.id)
            self._take(self.control.lease(1, self._held_proxies(), broken=list(self.broken)))

    def extras(self) -> list[Exit]:
        """Give up the proxies above ``cap`` (least recently used first) and return them, for
        the controller to take back."""
        extra = sorted(self.exits, key=lambda exit: exit.last_used)[:max(0, len(self.exits) - self.cap)]
        for exit in extra:
            self.exits.remove(exit)
        self.retired.extend(extra)
        return [exit for exit in extra if exit.id != DIRECT]

    def proxy_ids(self) -> list[int]:
        return self._held_proxies()

    def report(self) -> list[dict]:
        retired, self.retired = self.retired, []
        return [exit.report() for exit in self.exits + retired if exit.id != DIRECT]


class Cooldowns:
    """The shared host disable list: ``{host: until}``. Thread-safe (its own lock, so the
    thread that receives announcements never waits for a lease in progress).

    Announcements (``host_events``) are the controller's word: :meth:`disable` and
    :meth:`lift` apply at once. Lease replies carry the whole list as it was when the reply
    was made (:meth:`update`); a host lifted since is not put back by such a reply.
    """

    LIFT_MEMORY = 600.0  # seconds during which a lift outranks lease replies made before it

    def __init__(self, longest: float = 7200.0) -> None:
        self.until: dict[str, float] = {}
        self.lifted: dict[str, float] = {}  # host -> when it was lifted
        self.longest = longest  # no announcement disables a host for longer than this from now
        self._lock = threading.Lock()

    def disable(self, host: str, until: float) -> None:
        until = min(until, time.time() + self.longest)
        with self._lock:
            self.lifted.pop(host, None)
            self.until[host] = max(until, self.until.get(host, 0.0))

    def lift(self, host: str) -> None:
        """The host may be fetched again at once (``monitor hosts enable``)."""
        with self._lock:
            self.until.pop(host, None)
            self.lifted[host] = time.time()

    def update(self, hosts: dict[str, float]) -> None:
        """Merge the list a lease reply carried."""
        now = time.time()
        with self._lock:
            self.lifted = {host: at for host, at in self.lifted.items() if now - at < self.LIFT_MEMORY}
            hosts = {host: until for host, until in hosts.items() if host not in self.lifted}
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

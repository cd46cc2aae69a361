"""Exit rotation (the VPN patent's rules), cooldowns, politeness and host interleaving, with a fake lease."""
from __future__ import annotations

import time

from controller.scheduler import interleave_by_host
from monitor.messages import DIRECT, LeaseReply
from monitor.store import Watch
from workers.exits import Cooldowns, ExitPool, Politeness


class FakeController:
    """Grants proxies from a pool of ``size`` like the master does (shared when none is free),
    and disables a host once every proxy of the pool was reported refused by it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.calls: list[dict] = []
        self.refused: set[int] = set()
        self.broken: set[int] = set()
        self.released: list[list[int] | None] = []

    def lease(self, count: int, exclude: list[int], host: str | None = None, refused: list[int] | None = None,
              broken: list[int] | None = None) -> LeaseReply:
        self.calls.append({"count": count, "exclude": exclude, "host": host, "refused": refused, "broken": broken})
        self.refused.update(refused or [])
        self.broken.update(broken or [])
        pool = set(range(1, self.size + 1))
        granted = sorted(pool - set(exclude) - self.refused - self.broken)[:count]
        disabled = {host: 9e9} if host and not granted and (pool or {DIRECT}) <= self.refused else {}
        return LeaseReply([{"id": i, "url": f"http://proxy{i}:3128"} for i in granted], self.size, disabled)

    def release(self, proxy_ids: list[int] | None = None) -> None:
        self.released.append(proxy_ids)


def test_least_recently_used_untried_exit_is_picked_and_the_controller_is_asked_for_more():
    controller = FakeController(3)
    pool = ExitPool(controller)
    pool.ensure()
    assert [e.id for e in pool.exits] == [1, 2] and controller.calls[0]["count"] == 2
    tried: set[int] = set()
    first = pool.pick(tried)
    pool.used(first)
    tried.add(first.id)
    second = pool.pick(tried)
    assert (first.id, second.id) == (1, 2), "the least recently used exit comes next"
    pool.used(second)
    tried.add(second.id)
    assert pool.pick(tried) is None, "this job tried every exit the worker holds"
    reply = pool.more("news.example", [1, 2])
    assert controller.calls[-1] == {"count": 1, "exclude": [1, 2], "host": "news.example", "refused": [1, 2],
                                    "broken": []}
    third = pool.pick(tried)
    assert reply.disabled_hosts == {} and third.id == 3
    pool.used(third)
    assert [e.id for e in pool.extras()] == [1] and [e.id for e in pool.exits] == [2, 3], \
        "the least recently used extra goes back"


def test_only_the_controller_disables_a_host_when_every_exit_was_refused():
    controller = FakeController(2)
    pool = ExitPool(controller)
    pool.ensure()
    assert pool.more("news.example", [1]).disabled_hosts == {}, "proxy 2 was not refused yet"
    assert pool.more("news.example", [2]).disabled_hosts == {"news.example": 9e9}


def test_an_empty_pool_means_fetching_directly_and_a_refusal_is_reported_for_the_direct_exit():
    controller = FakeController(0)
    pool = ExitPool(controller)
    pool.ensure()
    assert pool.direct and [(e.id, e.name) for e in pool.exits] == [(DIRECT, "direct")]
    assert pool.pick({DIRECT}) is None
    assert pool.more("news.example", [DIRECT]).disabled_hosts == {"news.example": 9e9}
    assert pool.extras() == [] and pool.proxy_ids() == []


def test_a_proxy_that_fails_itself_is_dropped_reported_and_replaced():
    controller = FakeController(3)
    pool = ExitPool(controller)
    pool.ensure()
    pool.failed(pool.exits[0], "proxy failed: HTTP 407")
    assert controller.calls[-1]["broken"] == [1] and pool.broken == [], "reported at once"
    assert [e.id for e in pool.exits] == [2, 3], "and replaced"
    assert pool.report()[-1] == {"id": 1, "requests": 0, "refusals": 0, "last_error": "proxy failed: HTTP 407"}


def test_a_direct_worker_switches_to_proxies_added_later():
    controller = FakeController(0)
    now = [0.0]
    pool = ExitPool(controller, clock=lambda: now[0])
    pool.ensure()
    assert pool.direct
    controller.size = 1
    pool.ensure()
    assert pool.direct, "not asked again before RECHECK_DIRECT"
    now[0] = ExitPool.RECHECK_DIRECT + 1
    pool.ensure()
    assert not pool.direct and [e.id for e in pool.exits] == [1]


def test_heartbeat_report_carries_counters_once_and_masks_nothing_it_should_not_carry():
    pool = ExitPool(FakeController(2))
    pool.ensure()
    exit = pool.pick(set())
    pool.used(exit)
    pool.refused(exit, "HTTP 429")
    assert pool.report()[0] == {"id": 1, "requests": 1, "refusals": 1, "last_error": "HTTP 429"}
    assert pool.report()[0] == {"id": 1, "requests": 0, "refusals": 0, "last_error": None}


def test_exit_names_mask_passwords():
    controller = FakeController(1)
    controller.lease = lambda *args, **kwargs: LeaseReply([{"id": 1, "url": "http://u:secret@p:1"}], 1, {})
    pool = ExitPool(controller)
    pool.ensure()
    assert pool.exits[0].name == "http://u:***@p:1"


def test_cooldowns_expire():
    cooldowns = Cooldowns()
    cooldowns.update({"a.example": 100.0})
    cooldowns.disable("a.example", 50.0)
    assert cooldowns.disabled_until("a.example", now=60.0) == 100.0, "the later end wins"
    assert cooldowns.disabled_until("a.example", now=100.0) is None
    assert cooldowns.disabled_until("b.example", now=0.0) is None


def test_a_lift_outranks_lease_replies_made_before_it_but_not_a_new_announcement():
    cooldowns = Cooldowns()
    far = time.time() + 3600
    cooldowns.disable("a.example", far)
    cooldowns.lift("a.example")
    assert cooldowns.disabled_until("a.example") is None
    cooldowns.update({"a.example": far})  # a reply made before the lift
    assert cooldowns.disabled_until("a.example") is None
    cooldowns.disable("a.example", far)  # the controller disables it again
    assert cooldowns.disabled_until("a.example") == far


def test_politeness_spaces_requests_per_exit_and_host():
    slept: list[float] = []
    polite = Politeness(2.0, sleep=slept.append)
    pool = ExitPool(FakeController(2))
    pool.ensure()
    one, two = pool.exits
    polite.wait(one, "news.example")
    polite.wait(two, "news.example")
    polite.wait(one, "other.example")
    assert slept == [], "different exits or hosts do not wait"
    polite.wait(one, "news.example")
    assert len(slept) == 1 and 1.5 < slept[0] <= 2.0


def _watch(watch_id: int, url: str) -> Watch:
    return Watch(watch_id, url, None, None, 60, True, 0.0, None, None, None, None, 0)


def test_scheduler_interleaves_hosts_instead_of_bursting_one():
    due = [_watch(1, "https://a.example/1"), _watch(2, "https://a.example/2"), _watch(3, "https://a.example/3"),
           _watch(4, "https://b.example/"), _watch(5, "https://c.example/1"), _watch(6, "https://c.example/2")]
    assert [w.id for w in interleave_by_host(due)] == [1, 4, 5, 2, 6, 3]
    assert interleave_by_host([]) == []

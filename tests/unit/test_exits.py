"""Exit rotation (the VPN patent's rules), cooldowns, politeness and host interleaving, with a fake lease."""
from __future__ import annotations

from controller.scheduler import interleave_by_host
from monitor.messages import LeaseReply
from monitor.store import Watch
from workers.exits import Cooldowns, ExitPool, Politeness


class FakeController:
    """Grants proxies from a pool of ``size``, like the master does."""

    def __init__(self, size: int) -> None:
        self.free = list(range(1, size + 1))
        self.size = size
        self.calls: list[tuple[int, list[int]]] = []

    def lease(self, count: int, exclude: list[int]) -> LeaseReply:
        self.calls.append((count, exclude))
        granted, self.free = self.free[:count], self.free[count:]
        return LeaseReply([{"id": i, "url": f"http://proxy{i}:3128"} for i in granted], self.size, {"slow.example": 9e9})


def test_least_recently_used_exit_is_picked_and_refusals_rotate():
    controller = FakeController(3)
    pool = ExitPool(controller.lease)
    pool.ensure()
    assert [e.id for e in pool.exits] == [1, 2] and controller.calls == [(2, [])]
    first = pool.pick()
    pool.used(first)
    second = pool.pick()
    assert (first.id, second.id) == (1, 2), "the least recently used exit comes next"
    pool.used(second)
    pool.refused(second, "HTTP 429")
    assert pool.pick().id == 1
    pool.refused(pool.pick(), "HTTP 403")
    assert pool.pick() is None, "every exit flagged"
    assert pool.lease_more() and controller.calls[-1] == (1, [1, 2])
    assert pool.pick().id == 3
    pool.succeeded()
    assert not any(e.recently_used for e in pool.exits), "a success clears the flags"
    assert not pool.lease_more(), "the pool is exhausted"
    assert pool.disabled_hosts == {"slow.example": 9e9}


def test_an_empty_pool_means_fetching_directly():
    pool = ExitPool(FakeController(0).lease)
    pool.ensure()
    assert pool.direct and [e.name for e in pool.exits] == ["direct"]
    pool.refused(pool.pick(), "HTTP 429")
    assert pool.pick() is None and not pool.lease_more()


def test_a_direct_worker_switches_to_proxies_added_later():
    controller = FakeController(0)
    now = [0.0]
    pool = ExitPool(controller.lease, clock=lambda: now[0])
    pool.ensure()
    assert pool.direct
    controller.free, controller.size = [7], 1
    pool.ensure()
    assert pool.direct, "not asked again before RECHECK_DIRECT"
    now[0] = ExitPool.RECHECK_DIRECT + 1
    pool.ensure()
    assert not pool.direct and [e.id for e in pool.exits] == [7]


def test_heartbeat_report_carries_counters_once_and_masks_nothing_it_should_not_carry():
    pool = ExitPool(FakeController(2).lease)
    pool.ensure()
    exit = pool.pick()
    pool.used(exit)
    pool.refused(exit, "HTTP 429")
    assert pool.report()[0] == {"id": 1, "requests": 1, "refusals": 1, "last_error": "HTTP 429"}
    assert pool.report()[0] == {"id": 1, "requests": 0, "refusals": 0, "last_error": None}


def test_exit_names_mask_passwords():
    pool = ExitPool(lambda count, exclude: LeaseReply([{"id": 1, "url": "http://u:secret@p:1"}], 1, {}))
    pool.ensure()
    assert pool.exits[0].name == "http://u:***@p:1"


def test_cooldowns_expire():
    cooldowns = Cooldowns()
    cooldowns.update({"a.example": 100.0})
    cooldowns.disable("a.example", 50.0)
    assert cooldowns.disabled_until("a.example", now=60.0) == 100.0, "the later end wins"
    assert cooldowns.disabled_until("a.example", now=100.0) is None
    assert cooldowns.disabled_until("b.example", now=0.0) is None


def test_politeness_spaces_requests_per_exit_and_host():
    slept: list[float] = []
    polite = Politeness(2.0, sleep=slept.append)
    pool = ExitPool(FakeController(2).lease)
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

"""The worker fleet of the VPN design, with real proxy servers (tinyproxy) on loopback:
rotation, leases, host cooldown, lost workers, and no credential in any log."""
from __future__ import annotations

import json
import signal
import time

from tests.fleet import free_port
from tests.helpers import wait_for

FAST_FLEET = {"politeness_delay": 0.0, "heartbeat_interval": 0.5, "worker_lost_after": 3.0, "host_cooldown": 5}
PROXY_PASSWORD = "pr0xy-Secret-pw"


def add_proxies(pipeline, proxies: list[TinyProxy]) -> None:
    for proxy in proxies:
        result = pipeline.cli("proxy", "add", proxy.url)
        assert result.returncode == 0, result.stderr


def check_now(pipeline, watch_id: int) -> str:
    """Publish a job for the watch and return the status its result leaves."""
    before = pipeline.checks_done(watch_id)
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.checks_done(watch_id) > before, timeout=60, message=f"the result for watch {watch_id}")
    return pipeline.watch(watch_id).last_status


def _proxy_rows(pipeline) -> list[dict]:
    return [json.loads(line) for line in pipeline.cli("proxy", "list", "--json").stdout.splitlines()]


def test_rotation_spreads_requests_and_exhaustion_leases_one_more(pipeline, proxies, rationing):
    origin = rationing(allowance=3)
    add_proxies(pipeline, proxies("p1", "p2", "p3"))
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    worker = pipeline.worker()
    watch_id = pipeline.store.add_watch(origin.url("/news"), 3600).id

    statuses = [check_now(pipeline, watch_id) for _ in range(7)]
    assert statuses == ["ok"] * 7
    # LRU alternates p1/p2 three times each; the 7th job is refused by both, so p3 is leased.
    assert dict(origin.served) == {"p1": 3, "p2": 3, "p3": 1}
    assert dict(origin.refused) == {"p1": 1, "p2": 1}
    assert "direct" not in origin.served, "with proxies configured, nothing goes out directly"
    leases = {row["url"].rsplit(":", 1)[1]: row["leased_to"] for row in _proxy_rows(pipeline)}
    assert len(set(leases.values())) == 1 and None not in leases.values(), "all three leased to the one worker"
    assert '"granted": 1' in worker.log_text()
    wait_for(lambda: sum(row["requests"] for row in _proxy_rows(pipeline)) == 9, timeout=10,
             message="the heartbeats' request counters in `proxy list`")
    assert sum(row["refusals"] for row in _proxy_rows(pipeline)) == 2


def test_pool_exhaustion_cools_the_host_down_for_every_worker_then_fetching_resumes(pipeline, proxies, rationing):
    origin = rationing(allowance=1)
    add_proxies(pipeline, proxies("p1", "p2", "p3"))
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    pipeline.worker("worker_a")
    pipeline.worker("worker_b")
    watch_id = pipeline.store.add_watch(origin.url("/news"), 3600).id

    statuses = []
    while not statuses or statuses[-1] == "ok":
        statuses.append(check_now(pipeline, watch_id))
        assert len(statuses) <= 6, statuses
    assert statuses[:3] == ["ok"] * 3, "each of the three proxies serves once"
    assert statuses[-1].startswith("skipped: host disabled until ")

    # Both workers now skip the host without fetching: the discovery was broadcast.
    asked = origin.requests()
    assert [check_now(pipeline, watch_id) for _ in range(4)] == [statuses[-1]] * 4
    assert origin.requests() == asked
    status = pipeline.cli("status")
    assert "hosts in cooldown: 127.0.0.1 until" in status.stdout
    listed = pipeline.cli("watch", "list")
    assert "skipped: host disabled until" in listed.stdout

    origin.new_window()
    until = pipeline.store.cooldowns(time.time())["127.0.0.1"]
    wait_for(lambda: time.time() > until, timeout=30, message="the end of the (shortened) cooldown")
    assert check_now(pipeline, watch_id) == "ok"


def test_without_proxies_workers_fetch_directly_and_refusals_still_cool_down(pipeline, rationing):
    origin = rationing(allowance=2)
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    pipeline.worker()
    watch_id = pipeline.store.add_watch(origin.url("/news"), 3600).id

    assert [check_now(pipeline, watch_id) for _ in range(2)] == ["ok", "ok"]
    assert check_now(pipeline, watch_id).startswith("skipped: host disabled until ")
    assert dict(origin.served) == {"direct": 2} and dict(origin.refused) == {"direct": 1}


def test_a_killed_worker_is_marked_lost_and_its_proxies_are_leased_again(pipeline, proxies, rationing):
    origin = rationing(allowance=100)
    add_proxies(pipeline, proxies("p1", "p2"))
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    doomed = pipeline.worker("doomed")
    watch_id = pipeline.store.add_watch(origin.url("/news"), 3600).id
    assert check_now(pipeline, watch_id) == "ok"
    [first] = wait_for(lambda: _workers(pipeline), timeout=10, message="the first worker's heartbeat")
    assert {row["leased_to"] for row in _proxy_rows(pipeline)} == {first["id"]}, "both proxies leased to it"

    doomed.kill(signal.SIGKILL)
    wait_for(lambda: [w["state"] for w in _workers(pipeline)] == ["lost"], timeout=30, message="the worker marked lost")
    assert {row["leased_to"] for row in _proxy_rows(pipeline)} == {None}, "its proxies are back in the pool"

    pipeline.worker("heir")
    assert check_now(pipeline, watch_id) == "ok"
    [heir] = wait_for(lambda: [w for w in _workers(pipeline) if w["state"] == "alive"], timeout=10,
                      message="the heir's heartbeat")
    assert {row["leased_to"] for row in _proxy_rows(pipeline)} == {heir["id"]}
    table = pipeline.cli("workers").stdout
    assert "lost" in table and "alive" in table


def _workers(pipeline) -> list[dict]:
    return [json.loads(line) for line in pipeline.cli("workers", "--json").stdout.splitlines()]


def test_proxy_credentials_never_appear_in_logs_or_output(pipeline, proxies, rationing, tmp_path):
    origin = rationing(allowance=100)
    [good] = proxies("good", credentials=("alice", PROXY_PASSWORD))
    # A dead exit with credentials: its connection errors quote the proxy URL, and must mask it.
    wrong_url = f"http://bob:{PROXY_PASSWORD}@127.0.0.1:{free_port()}"
    for url in (wrong_url, good.url):
        assert pipeline.cli("proxy", "add", url).returncode == 0
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    pipeline.worker()
    watch_id = pipeline.store.add_watch(origin.url("/news"), 3600).id

    assert check_now(pipeline, watch_id) == "ok"
    assert dict(origin.served) == {"good": 1}
    wait_for(lambda: any(row["refusals"] for row in _proxy_rows(pipeline)), timeout=10, message="the refusal recorded")
    outputs = [pipeline.cli(*args) for args in (("proxy", "list"), ("workers",), ("status",), ("watch", "list"))]
    outputs.append(pipeline.cli("proxy", "test", wrong_url, "--page", origin.url("/news")))
    assert outputs[-1].returncode == 1 and "proxy failed" in outputs[-1].stderr
    texts = [out.stdout + out.stderr for out in outputs] + [p.read_text() for p in tmp_path.glob("*.log")]
    assert all(PROXY_PASSWORD not in text for text in texts)
    assert "alice:***@" in outputs[0].stdout and "bob:***@" in outputs[0].stdout
    assert "bob:***@" in outputs[-1].stderr

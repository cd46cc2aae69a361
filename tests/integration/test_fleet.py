"""The worker fleet of the VPN design, with real proxy servers (tinyproxy) on loopback:
rotation, leases, host cooldown, lost workers, and no credential in any log."""
from __future__ import annotations

import json
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fleet import free_port
from tests.helpers import send, wait_for

FAST_FLEET = {"politeness_delay": 0.0, "heartbeat_interval": 0.5, "worker_lost_after": 3.0, "host_cooldown": 5}
PROXY_PASSWORD = "pr0xy-Secret-pw"


def add_proxies(pipeline, proxies: list[TinyProxy]) -> None:
    for proxy in proxies:
        result = pipeline.cli("proxy", "add", proxy.url, "--no-test")  # the test's fetch would use an allowance
        assert result.returncode == 0, result.stderr


def check_now(pipeline, watch_id: int) -> str:
    """Publish a job for the watch and return the status its result leaves."""
    before = pipeline.checks_done(watch_id)
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.checks_done(watch_id) > before, timeout=60, message=f"the result for watch {watch_id}")
    return pipeline.watch(watch_id).last_status


def _proxy_rows(pipeline) -> list[dict]:
    return [json.loads(line) for line in pipeline.cli("proxy", "list", "--json").stdout.splitlines()]


def test_rotation_spreads_requests_and_exhaustion_leases_one_more_for_the_job(pipeline, proxies, rationing):
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
    assert '"granted": 1' in worker.log_text()
    holders = sorted(row["leased_to"] for row in _proxy_rows(pipeline))
    assert holders[0] == [] and holders[1] == holders[2] and len(holders[1]) == 1, \
        "after the job, the extra exit goes back (the least recently used: p1); the worker keeps two"
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
    assert [row["leased_to"] for row in _proxy_rows(pipeline)] == [[first["id"]]] * 2, "both proxies leased to it"

    doomed.kill(signal.SIGKILL)
    wait_for(lambda: [w["state"] for w in _workers(pipeline)] == ["lost"], timeout=30, message="the worker marked lost")
    assert [row["leased_to"] for row in _proxy_rows(pipeline)] == [[], []], "its proxies are back in the pool"

    pipeline.worker("heir")
    assert check_now(pipeline, watch_id) == "ok"
    [heir] = wait_for(lambda: [w for w in _workers(pipeline) if w["state"] == "alive"], timeout=10,
                      message="the heir's heartbeat")
    assert [row["leased_to"] for row in _proxy_rows(pipeline)] == [[heir["id"]]] * 2
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
        assert pipeline.cli("proxy", "add", url, "--no-test").returncode == 0
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    pipeline.worker()
    watch_id = pipeline.store.add_watch(origin.url("/news"), 3600).id

    assert check_now(pipeline, watch_id) == "ok"
    assert dict(origin.served) == {"good": 1}
    wait_for(lambda: any(row["failed_at"] and row["last_error"] for row in _proxy_rows(pipeline)), timeout=10,
             message="the dead proxy recorded as failed, with its error")
    outputs = [pipeline.cli(*args) for args in (("proxy", "list"), ("workers",), ("status",), ("watch", "list"))]
    outputs.append(pipeline.cli("proxy", "test", wrong_url, "--page", origin.url("/news")))
    assert outputs[-1].returncode == 1 and "cannot connect to the proxy" in outputs[-1].stderr
    texts = [out.stdout + out.stderr for out in outputs] + [p.read_text() for p in tmp_path.glob("*.log")]
    assert all(PROXY_PASSWORD not in text for text in texts)
    assert "alice:***@" in outputs[0].stdout and "bob:***@" in outputs[0].stdout
    assert "bob:***@" in outputs[-1].stderr


def test_one_proxy_serves_both_workers_and_disables_no_host(pipeline, proxies, rationing):
    """A user with one VPN exit and the default two workers: the exit is shared, nothing is
    skipped (a worker that could lease no exit used to disable every host it checked)."""
    origin = rationing(allowance=1000)
    add_proxies(pipeline, proxies("only"))
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    workers = [pipeline.worker("worker_a"), pipeline.worker("worker_b")]
    wait_for(lambda: all('"broker connected"' in worker.log_text() for worker in workers), timeout=30,
             message="both workers consuming")
    watch_ids = [pipeline.store.add_watch(origin.url(f"/page-{n}"), 3600).id for n in range(12)]
    for watch_id in watch_ids:
        pipeline.publish_job(watch_id)
    wait_for(lambda: all(pipeline.checks_done(watch_id) for watch_id in watch_ids), timeout=60,
             message="every watch checked")
    assert {pipeline.watch(watch_id).last_status for watch_id in watch_ids} == {"ok"}
    assert pipeline.store.cooldowns(time.time()) == {}
    assert all('"event": "checked"' in worker.log_text() for worker in workers), "both workers took jobs"
    [row] = _proxy_rows(pipeline)
    assert len(row["leased_to"]) == 2, "the one proxy is leased to both workers"


def test_a_site_error_is_not_a_refusal(pipeline, proxies):
    """Connection refused by the site, directly or behind a proxy, is that watch's error: no
    exit is flagged, no host cooled down, and the next check tries again."""
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    direct = pipeline.worker("direct")
    watch_id = pipeline.store.add_watch(f"http://127.0.0.1:{free_port()}/", 3600).id
    statuses = [check_now(pipeline, watch_id) for _ in range(2)]
    assert all(status.startswith("error: connection failed") for status in statuses), statuses
    direct.kill(signal.SIGTERM)
    add_proxies(pipeline, proxies("p1"))
    pipeline.worker("proxied")
    statuses = [check_now(pipeline, watch_id) for _ in range(2)]
    assert all(status.startswith("error: HTTP 5") for status in statuses), "the proxy reports the site's failure"
    assert pipeline.store.cooldowns(time.time()) == {}
    wait_for(lambda: _proxy_rows(pipeline)[0]["requests"] >= 2, timeout=10, message="the proxy's counters")
    [row] = _proxy_rows(pipeline)
    assert row["refusals"] == 0 and row["failed_at"] is None


def test_a_restarted_worker_gets_fresh_leases_and_its_old_ones_go_back(pipeline, proxies, rationing):
    """supervisord restarts a crashed worker under the same name, and it beats "alive" at
    once: the leases of the run that died must not stay assigned to that name."""
    origin = rationing(allowance=100)
    add_proxies(pipeline, proxies("p1", "p2", "p3", "p4"))
    pipeline.configure(**dict(FAST_FLEET, worker_lost_after=300))
    pipeline.processor()
    pipeline.env["SUPERVISOR_PROCESS_NAME"] = "worker_00"
    first = pipeline.worker()
    watch_id = pipeline.store.add_watch(origin.url("/news"), 3600).id
    assert check_now(pipeline, watch_id) == "ok"
    leased = sorted(row["id"] for row in _proxy_rows(pipeline) if row["leased_to"])
    assert len(leased) == 2

    first.restart()  # SIGKILL, then the same name again
    assert check_now(pipeline, watch_id) == "ok"
    rows = _proxy_rows(pipeline)
    assert sum(len(row["leased_to"]) for row in rows) == 2, "only the new run's leases remain"
    assert {name for row in rows for name in row["leased_to"]} == {f"{socket.gethostname()}/worker_00"}


def test_no_cookie_travels_between_checks_and_the_environment_chooses_no_proxy(pipeline):
    """A cookie set through one exit must not be sent through another (it would let a site
    link the rotated addresses), and `HTTP_PROXY` in a worker's environment must not turn a
    "direct" fetch into a proxied one."""
    seen: list[str | None] = []

    class CookieSetter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            seen.append(self.headers.get("Cookie"))
            send(self, b'<a href="/story">Story</a>', headers={"Set-Cookie": f"visitor={len(seen)}; Path=/"})

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), CookieSetter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        pipeline.env.update(HTTP_PROXY=f"http://127.0.0.1:{free_port()}", http_proxy=f"http://127.0.0.1:{free_port()}")
        pipeline.configure(**FAST_FLEET)
        pipeline.processor()
        pipeline.worker()
        watch_id = pipeline.store.add_watch(f"http://127.0.0.1:{server.server_port}/", 3600).id
        assert [check_now(pipeline, watch_id) for _ in range(3)] == ["ok"] * 3, "the dead HTTP_PROXY was not used"
        assert seen == [None, None, None]
    finally:
        server.shutdown()
        server.server_close()


def test_a_watch_urls_password_is_never_shown_nor_copied_into_links(pipeline, site):
    """`https://user:secret@host/` is fetched with its credentials, but the password shows
    nowhere, and urljoin no longer copies the userinfo into every relative link."""
    secret = "w4tch-Secret-pw"
    url = site.add_page("/", [("/a", "A story")]).replace("http://", f"http://reader:{secret}@")
    pipeline.configure(**FAST_FLEET)
    pipeline.processor()
    pipeline.worker()
    watch_id = pipeline.store.add_watch(url, 3600).id
    assert check_now(pipeline, watch_id) == "ok"
    site.publish("/", "/b", "B story")
    assert check_now(pipeline, watch_id) == "ok"
    assert {link.url for link in pipeline.store.links(watch_id)} == {site.url("/a"), site.url("/b")}
    wait_for(lambda: pipeline.cli("workers", "--json").stdout, timeout=10, message="a heartbeat")
    outputs = [pipeline.cli(*args).stdout for args in (("watch", "list"), ("watch", "export"), ("alerts",),
                                                       ("workers", "--json"), ("status",))]
    texts = outputs + [path.read_text() for path in pipeline.home.glob("*.log")] + [
        pipeline.config.alerts_path.read_text()]
    assert all(secret not in text for text in texts)
    assert "reader:***@" in outputs[0] and "reader:***@" in outputs[1]
    imported = pipeline.home / "export.csv"
    imported.write_text(outputs[1])
    refused = pipeline.cli("watch", "import", str(imported))
    assert "its password is masked" in refused.stderr


def test_a_disabled_host_says_why_and_enable_lifts_it_in_every_worker_at_once(pipeline, rationing):
    origin = rationing(allowance=1)
    pipeline.configure(politeness_delay=0.0, heartbeat_interval=0.5)  # the default cooldowns
    pipeline.processor()
    worker = pipeline.worker()
    watch_id = pipeline.store.add_watch(origin.url("/news"), 3600).id
    assert check_now(pipeline, watch_id) == "ok"
    assert check_now(pipeline, watch_id).startswith("skipped: host disabled until ")

    [host] = [json.loads(line) for line in pipeline.cli("hosts", "--json").stdout.splitlines()]
    assert (host["host"], host["strikes"], host["exits"]) == ("127.0.0.1", 1, "direct") and host["worker"]
    assert host["until"] - host["since"] == 300, "one refusal costs five minutes, not two hours"
    assert "(refused the direct connection (no proxies configured), 1 in a row; `monitor hosts enable 127.0.0.1` lifts it)" \
        in pipeline.cli("watch", "list").stdout

    origin.new_window()
    enabled = pipeline.cli("hosts", "enable", "127.0.0.1")
    assert enabled.returncode == 0 and "enabled" in enabled.stdout
    wait_for(lambda: "host enabled again" in worker.log_text(), timeout=10, message="the worker told of the lift")
    assert check_now(pipeline, watch_id) == "ok", "fetched again at once, without restarting anything"
    assert pipeline.cli("hosts").stdout == "no host is disabled\n"
    again = pipeline.cli("hosts", "enable", "127.0.0.1")
    assert again.returncode == 2 and "is not disabled" in again.stderr


def test_proxy_add_tries_the_proxy_first_and_refuses_one_that_cannot_connect(pipeline, proxies, site):
    page = site.add_page("/", [("/a", "A")])
    dead = f"http://127.0.0.1:{free_port()}"
    refused = pipeline.cli("proxy", "add", dead, "--page", page)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "cannot connect to the proxy" in refused.stderr and "nothing added" in refused.stderr
    assert _proxy_rows(pipeline) == []

    [good] = proxies("good")
    added = pipeline.cli("proxy", "add", good.url, "--page", page)
    assert added.returncode == 0, added.stderr
    assert pipeline.cli("proxy", "add", dead, "--no-test").returncode == 0, "on purpose, untested"
    assert len(_proxy_rows(pipeline)) == 2

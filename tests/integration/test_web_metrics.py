"""``/metrics`` and ``/healthz`` of the real web process, over a real pipeline and broker."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from monitor.cli.operations import Status
from monitor.store import CheckResult, open_store
from monitor.web.metrics import health_reasons
from tests.helpers import wait_for

INITIAL = [("/a", "First story"), ("/b", "Second story")]


def _get(url: str) -> tuple[int, str, bytes]:
    """Status, content type and body of a GET (an error status is an answer, not an exception)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def _scrape(pipeline) -> tuple[set[str], dict[tuple[str, frozenset], float]]:
    """The family names and every sample ``(name, labels) -> value`` of one scrape, as
    Prometheus' own parser reads them."""
    status, content_type, body = _get(pipeline.web_url + "metrics")
    assert status == 200 and content_type.startswith("text/plain")
    families = list(text_string_to_metric_families(body.decode()))
    samples = {(s.name, frozenset(s.labels.items())): s.value for family in families for s in family.samples}
    return {family.name for family in families}, samples


def _value(pipeline, name: str, **labels: str) -> float | None:
    return _scrape(pipeline)[1].get((name, frozenset(labels.items())))


def _health(pipeline) -> tuple[int, dict]:
    status, content_type, body = _get(pipeline.web_url + "healthz")
    assert content_type.startswith("application/json")
    return status, json.loads(body)


def test_metrics_are_served_and_move_as_the_pipeline_works(pipeline, site):
    url = site.add_page("/", INITIAL)
    pipeline.processor()
    pipeline.worker()
    pipeline.web()
    watch_id = pipeline.store.add_watch(url, 3600).id

    names, samples = _scrape(pipeline)
    for family in ("monitor_checks", "monitor_fetch_seconds", "monitor_parse_seconds", "monitor_alerts", "monitor_alert_deliveries",
                   "monitor_broker_up", "monitor_schedule_lag_seconds", "monitor_workers", "monitor_exit_refusals",
                   "monitor_hosts_disabled", "monitor_watches", "monitor_watches_enabled", "monitor_watches_failing",
                   "monitor_supervisord_up"):
        assert family in names, family
    checked_before = samples[("monitor_checks_total", frozenset({("outcome", "ok")}))]
    alerts_before = samples[("monitor_alerts_total", frozenset())]
    assert samples[("monitor_watches", frozenset())] == 1
    assert samples[("monitor_broker_up", frozenset())] == 1
    assert samples[("monitor_supervisord_up", frozenset())] == 0, "the test runs the web front outside supervisord"

    pipeline.publish_job(watch_id)  # the baseline: a check, no alert
    wait_for(lambda: _value(pipeline, "monitor_checks_total", outcome="ok") == checked_before + 1, timeout=60,
             message="the baseline counted by /metrics")
    assert _value(pipeline, "monitor_alerts_total") == alerts_before

    site.publish("/", "/news", "Fresh news")
    pipeline.publish_job(watch_id)
    wait_for(lambda: _value(pipeline, "monitor_alerts_total") == alerts_before + 1, timeout=60,
             message="the new link's alert counted by /metrics")

    _, samples = _scrape(pipeline)
    assert samples[("monitor_checks_total", frozenset({("outcome", "ok")}))] == checked_before + 2
    for kind in ("fetch", "parse"):  # both checks downloaded and parsed the page
        assert samples[(f"monitor_{kind}_seconds_count", frozenset())] == 2, kind
        assert samples[(f"monitor_{kind}_seconds_bucket", frozenset({("le", "+Inf")}))] == 2, kind
    assert samples[("monitor_fetch_seconds_sum", frozenset())] < 60
    assert 0 < samples[("monitor_parse_seconds_sum", frozenset())] < 60
    assert samples[("monitor_queue_messages_ready", frozenset({("queue", "job_queue")}))] == 0, "both jobs done"
    wait_for(lambda: _value(pipeline, "monitor_workers", state="alive") == 1, timeout=30,
             message="the worker's heartbeat counted as alive")


def test_healthz_fails_while_a_watch_is_overdue_and_recovers_once_it_is_checked(pipeline, site):
    url = site.add_page("/", INITIAL)
    pipeline.processor()
    pipeline.worker()
    pipeline.web()
    watch_id = pipeline.store.add_watch(url, 3600).id  # first due within a minute: not overdue

    status, body = _health(pipeline)
    assert (status, body["status"], body["reasons"], body["broker"]) == (200, "ok", [], "up")
    assert body["processes"].startswith("not judged"), "no supervisord in this test"

    # No scheduler runs: due two hours ago, it stays overdue (by more than its interval).
    pipeline.store.make_due([watch_id], time.time() - 7200)
    status, body = _health(pipeline)
    assert (status, body["status"], body["overdue_watches"]) == (503, "stuck", 1)
    assert len(body["reasons"]) == 1 and f"watch {watch_id} was due" in body["reasons"][0]

    pipeline.publish_job(watch_id)  # checked: due again in the future
    wait_for(lambda: _health(pipeline)[0] == 200, timeout=60, message="/healthz healthy after the check")


def _status(processes: list[dict], process_error: str | None = None, queue_error: str | None = None) -> Status:
    return Status(now=0.0, processes=processes, process_error=process_error, queues={}, queue_error=queue_error,
                  summary={}, rates={}, lag={"behind_s": 0.0, "overdue_by_an_interval": 0}, fleet={}, cooldowns={},
                  costly=[])


def test_health_judges_supervised_programs_but_not_those_this_configuration_never_starts():
    # (supervisord's view as getAllProcessInfo gives it; the supervised stack has its own tests.)
    processes = [{"name": "processor", "group": "processor", "statename": "RUNNING", "start": 1.0},
                 {"name": "worker_01", "group": "worker", "statename": "FATAL", "start": 1.0},
                 {"name": "notifier", "group": "notifier", "statename": "STOPPED", "start": 1.0},
                 {"name": "rabbitmq", "group": "rabbitmq", "statename": "STOPPED", "start": 0}]
    assert health_reasons(_status(processes), (0, None)) == ["process worker:worker_01 is FATAL",
                                                             "process notifier is STOPPED"]
    assert health_reasons(_status([], process_error="supervisord is not running"), (0, None)) == []
    assert health_reasons(_status([], process_error="supervisord is not running"), (0, None), supervised=True) == \
        ["supervisord cannot be asked about the programs: supervisord is not running"], "when it runs us, it must answer"
    assert health_reasons(_status([], queue_error="refused"), (0, None)) == ["the broker cannot be reached: refused"]


def test_fetch_and_parse_times_are_counted_in_their_buckets_for_every_check(tmp_path):
    store = open_store(tmp_path / "db.sqlite3")
    watch_id = store.add_watch("https://example.org/", 3600).id
    for at, fetch_ms, parse_ms in ((1000.0, 40, 3), (1001.0, 40, 30), (1002.0, 7000, None), (1003.0, 45000, None)):
        store.record_results([CheckResult(watch_id, at, "ok", 200, fetch_ms, [], {}, parse_ms=parse_ms)])
    fetch, fetch_sum = store.timing_histogram("fetch")
    fetch = dict(fetch)
    assert (fetch[0.025], fetch[0.05], fetch[5.0], fetch[10.0], fetch[30.0], fetch[float("inf")]) == (0, 2, 2, 3, 3, 4)
    assert abs(fetch_sum - 52.08) < 1e-9
    parse, parse_sum = store.timing_histogram("parse")
    assert (dict(parse)[0.005], dict(parse)[0.05], dict(parse)[float("inf")]) == (1, 2, 2)
    assert abs(parse_sum - 0.033) < 1e-9
    store.close()


def test_check_totals_do_not_go_down_when_old_minutes_are_pruned(tmp_path):
    """A Prometheus counter that went down would read as a restart (and a burst in rate())."""
    store = open_store(tmp_path / "db.sqlite3")
    now = time.time()
    watch_id = store.add_watch("https://example.org/", 3600).id
    for checked_at, outcome in ((now - 3 * 86400, "ok"), (now - 2 * 86400, "ok"), (now - 2 * 86400, "error"),
                                (now, "ok")):
        store.record_results([CheckResult(watch_id, checked_at, "ok", 200, 10, [], {}, outcome=outcome)])
    assert store.check_totals() == {"ok": 3, "error": 1}
    assert store.prune(now, now)["check_counts"] == 3
    assert store.check_totals() == {"ok": 3, "error": 1}
    store.record_results([CheckResult(watch_id, now - 4 * 86400, "ok", 200, 10, [], {})])
    store.prune(now, now)  # pruned again: added to what earlier prunings kept
    assert store.check_totals() == {"ok": 4, "error": 1}
    assert store.check_rates(now, 300)["total"] > 0 and "error" not in store.check_rates(now, 300)
    store.close()

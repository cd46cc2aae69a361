"""The pipeline end to end on a real RabbitMQ node, real processes, a real local origin."""
from __future__ import annotations

import json
import re
import signal
import time

from monitor import amqp
from tests.helpers import wait_for

INITIAL = [("/a", "First story"), ("/b", "Second story"), ("/c", "Third story")]


def _add_watch(pipeline, url: str, interval: str = "1s") -> int:
    result = pipeline.cli("watch", "add", url, "--interval", interval)
    assert result.returncode == 0, result.stderr
    return int(re.search(r"added watch (\d+)", result.stdout).group(1))


def _wait_checks(pipeline, watch_id: int, count: int = 2) -> None:
    """Wait until the watch has been checked ``count`` more times (proof the pipeline moved on)."""
    for _ in range(count):
        before = pipeline.checks_done(watch_id)
        wait_for(lambda: pipeline.checks_done(watch_id) > before, timeout=30, message="another check of the watch")


def test_baseline_then_exactly_the_new_links_are_alerted(pipeline, site):
    url = site.add_page("/", INITIAL)
    pipeline.scheduler()
    pipeline.processor()
    pipeline.worker("worker_a")
    pipeline.worker("worker_b")
    watch_id = _add_watch(pipeline, url)

    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the baseline check")
    _wait_checks(pipeline, watch_id)
    assert {link.url for link in pipeline.store.links(watch_id)} == {site.url(path) for path, _ in INITIAL}
    assert pipeline.alert_lines() == [], "the baseline must not alert"

    site.publish("/", "/new-1", "Breaking: one")
    site.publish("/", "https://elsewhere.example/new-2#top", "  Breaking:\n two ")
    wait_for(lambda: len(pipeline.alert_lines()) >= 2, timeout=30, message="two alerts")
    _wait_checks(pipeline, watch_id)

    alerts = pipeline.alert_lines()
    assert sorted((a["url"], a["text"]) for a in alerts) == [
        (site.url("/new-1"), "Breaking: one"),
        ("https://elsewhere.example/new-2", "Breaking: two"),
    ]
    assert all(a["watch_id"] == watch_id and a["baseUrl"] == url for a in alerts)
    assert len({a["alert_id"] for a in alerts}) == 2
    # The store and the CLI agree with the sink.
    listed = pipeline.cli("alerts", "--json")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 2
    watch_row = [w for w in pipeline.store.list_watches() if w.id == watch_id][0]
    assert (watch_row.links_known, watch_row.new_links) == (5, 2)


def test_worker_killed_mid_job_is_redelivered_with_the_same_result(pipeline, site):
    url = site.add_page("/slow", INITIAL)
    pipeline.processor()
    doomed = pipeline.worker("doomed")
    watch_id = pipeline.store.add_watch(url, 3600).id

    entered = site.hold("/slow")
    pipeline.publish_job(watch_id)
    wait_for(entered.is_set, timeout=30, message="the worker to start fetching")
    doomed.kill(signal.SIGKILL)
    site.release("/slow")

    rescuer = pipeline.worker("rescuer")
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the redelivered job's result")
    assert {link.url for link in pipeline.store.links(watch_id)} == {site.url(path) for path, _ in INITIAL}
    assert '"redelivered": true' in rescuer.log_text()
    assert pipeline.alert_lines() == []


def test_processor_restarted_between_tasks_gives_no_duplicate_alerts(pipeline, site):
    url = site.add_page("/", INITIAL)
    processor = pipeline.processor()
    pipeline.worker()
    watch_id = pipeline.store.add_watch(url, 3600).id

    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the baseline")
    site.publish("/", "/fresh", "Fresh story")

    processor.kill(signal.SIGKILL)
    pipeline.publish_job(watch_id)
    pipeline.publish_job(watch_id)  # the same page twice: a duplicate delivery
    processor.start()
    wait_for(lambda: len(pipeline.alert_lines()) >= 1, timeout=60, message="the alert after the restart")
    before = pipeline.checks_done(watch_id)
    processor.restart()
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.checks_done(watch_id) > before, timeout=60, message="one more check")

    alerts = pipeline.alert_lines()
    assert [(a["url"], a["text"]) for a in alerts] == [(site.url("/fresh"), "Fresh story")]
    assert len(pipeline.store.alerts()) == 1



def test_a_backlog_never_doubles_a_job_and_a_lost_job_is_published_again(pipeline, site):
    """With no worker, due watches wait in job_queue: past job_timeout they are not
    published again (the queue holds one job per watch). A job that is really lost (here:
    purged) is published again once it is overdue and nothing waits in the queue."""
    pipeline.configure(job_timeout=2, politeness_delay=0.0)
    watch_ids = [pipeline.store.add_watch(site.add_page(f"/w{n}/", INITIAL), 1).id for n in range(20)]
    with pipeline.store.transaction() as conn:
        conn.execute("UPDATE watches SET next_due = 0")
    pipeline.scheduler()
    channel = pipeline.channel()
    ready = lambda: channel.queue_declare(amqp.JOB_QUEUE, passive=True).method.message_count  # noqa: E731
    wait_for(lambda: ready() == 20, timeout=30, message="one job per due watch")
    published_at = max(pipeline.watch(w).in_flight_since for w in watch_ids)
    # Give the timeout every chance to fire: three times job_timeout, at ten ticks a second.
    wait_for(lambda: time.time() > published_at + 6, timeout=10, message="job_timeout to pass, three times")
    assert ready() == 20, "a watch waiting in the queue is never published twice"

    channel.queue_purge(amqp.JOB_QUEUE)
    wait_for(lambda: ready() == 20, timeout=30, message="the lost jobs published again")
    pipeline.processor()
    pipeline.worker()
    wait_for(lambda: all(pipeline.watch(w).last_status == "ok" for w in watch_ids), timeout=60, message="every check")
    assert len(pipeline.store.links(watch_ids[0])) == len(INITIAL)


def test_an_unchanged_page_is_not_parsed_again_and_status_counts_it(pipeline, site):
    url = site.add_page("/", INITIAL)
    pipeline.configure(politeness_delay=0.0)
    pipeline.scheduler()
    pipeline.processor()
    pipeline.worker()
    watch_id = _add_watch(pipeline, url)
    wait_for(lambda: pipeline.watch(watch_id).content_hash, timeout=60, message="the baseline and its body hash")
    _wait_checks(pipeline, watch_id, 2)
    assert pipeline.watch(watch_id).last_status == "ok"
    status = json.loads(pipeline.cli("status", "--json").stdout)
    rates = status["checks_per_second"]["last_minute"]
    assert rates["not_modified_hash"] > 0 and rates["ok"] > 0, rates
    assert status["schedule"]["behind_s"] < 30
    text = pipeline.cli("status").stdout
    assert "by body hash" in text and "behind schedule" in text

    site.publish("/", "/d", "Fourth story")
    wait_for(lambda: [a["url"] for a in pipeline.alert_lines()] == [site.url("/d")], timeout=30,
             message="the new link alerted once the body changed")

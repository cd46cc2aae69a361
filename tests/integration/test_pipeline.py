"""The pipeline end to end on a real RabbitMQ node, real processes, a real local origin."""
from __future__ import annotations

import re
import signal

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


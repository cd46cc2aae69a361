"""The pipeline end to end on a real RabbitMQ node, real processes, a real local origin."""
from __future__ import annotations

import json
import re
import signal
import time

import pika
import pytest

from monitor import amqp
from monitor import broker as local_broker
from tests.helpers import wait_for
from tests.integration.conftest import REPO, Pipeline, Proc

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


def test_a_second_home_on_the_same_vhost_is_refused_and_takes_nothing(pipeline, site, rabbit, tmp_path):
    """Two homes with one AMQP_URL would consume each other's tasks: the home that comes
    second is refused by the broker (its controller processes and CLI exit 2, saying why),
    and the first keeps its pipeline whole."""
    watch_id = _add_watch(pipeline, site.add_page("/", INITIAL))
    pipeline.processor()
    pipeline.scheduler()
    pipeline.worker()
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the first home's baseline")

    (tmp_path / "second").mkdir()
    second = Pipeline(tmp_path / "second", rabbit)
    try:
        up = second.cli("up")
        assert up.returncode == 2 and "belongs to another monitor home" in up.stderr, up.stderr
        assert second.cli("dlq", "list").returncode == 2
        intruders = [second.processor(), second.scheduler(), second.master()]
        for proc in intruders:
            wait_for(lambda: proc.proc.poll() is not None, timeout=60, message=f"{proc.name} of the second home exiting")
            assert proc.proc.returncode == 2 and "give each home its own vhost" in proc.log_text()
    finally:
        second.cli("down")
        second.stop()

    site.publish("/", "/d", "Fourth story")
    wait_for(lambda: pipeline.alert_lines(), timeout=60, message="the first home's alert")
    assert [alert["url"] for alert in pipeline.alert_lines()] == [site.url("/d")]


def test_a_worker_with_the_readmes_restricted_broker_user_checks_pages(pipeline, site, rabbit):
    """The README's per-role permissions are enough for a worker (leases, cooldowns, jobs,
    tasks) and keep it away from the controller's queues."""
    line = next(line for line in (REPO / "README.md").read_text().splitlines()
                if line.startswith("rabbitmqctl set_permissions") and "fleet-worker" in line)
    configure, write, read = re.findall(r"'([^']*)'", line)
    if "fleet-worker" not in local_broker.ctl(rabbit.config, "list_users"):
        local_broker.ctl(rabbit.config, "add_user", "fleet-worker", "worker-secret")
    local_broker.ctl(rabbit.config, "set_permissions", "-p", "/", "fleet-worker", configure, write, read)
    worker_url = re.sub(r"//[^@]*@", "//fleet-worker:worker-secret@", rabbit.url)

    watch_id = pipeline.store.add_watch(site.add_page("/", INITIAL), 3600).id
    pipeline.processor()
    pipeline.master_proc = pipeline.master()
    pipeline.channel()  # the controller's side declares the topology
    worker = Proc("workers.worker", dict(pipeline.env, AMQP_URL=worker_url), pipeline.home, "worker").start()
    pipeline.procs.append(worker)
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the restricted worker's check")
    assert "proxies leased" in pipeline.master_proc.log_text(), "the worker asked the master for exits"

    connection = pika.BlockingConnection(pika.URLParameters(worker_url))
    for forbidden in (lambda ch: ch.basic_get(amqp.TASK_QUEUE), lambda ch: ch.basic_get(amqp.HEARTBEAT_QUEUE),
                      lambda ch: ch.basic_get(amqp.CONTROL_QUEUE), lambda ch: ch.queue_delete(amqp.JOB_QUEUE),
                      lambda ch: ch.queue_declare("job_queue_2", durable=True)):
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            forbidden(connection.channel())
        assert refused.value.reply_code == 403
    connection.close()


def test_filters_hold_back_alerts_but_record_the_links_so_changing_them_never_floods(pipeline, site):
    url = site.add_page("/", INITIAL)
    watch_id = _add_watch(pipeline, url)
    # (The last rule backtracks without end on a run of a's not at the end: its searches time out.)
    for rule in (("include", "election"), ("exclude", "/\\bsports?\\b/"), ("same-site",), ("exclude", "/(a|aa)+$/")):
        assert pipeline.cli("filter", "add", *rule, "--watch", str(watch_id)).returncode == 0
    pipeline.processor()
    pipeline.worker()
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the baseline")

    site.publish("/", "/election-results", "Election results")
    site.publish("/", "/weather", "Weather")
    site.publish("/", "/election-sports-day", "Election sports day")
    site.publish("/", "https://elsewhere.example/election", "Election elsewhere")
    site.publish("/", "/election-night", "Election night a" + "a" * 40 + "!")
    _wait_checks_now(pipeline, watch_id)
    assert sorted(alert["url"] for alert in pipeline.alert_lines()) == [site.url("/election-night"),
                                                                         site.url("/election-results")]
    known = pipeline.cli("links", str(watch_id)).stdout
    assert all(path in known for path in ("/weather", "/election-sports-day", "elsewhere.example")), \
        "held-back links are recorded"

    for rule in json_lines(pipeline.cli("filter", "list", "--json").stdout):
        assert pipeline.cli("filter", "remove", str(rule["id"])).returncode == 0
    site.publish("/", "/new-after", "Anything at all")
    wait_for(lambda: _checked_alerting(pipeline, watch_id, site.url("/new-after")), timeout=60,
             message="the next new link alerted once the rules are gone")
    assert sorted(alert["url"] for alert in pipeline.alert_lines()) == [site.url("/election-night"),
                                                                         site.url("/election-results"),
                                                                         site.url("/new-after")]


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _wait_checks_now(pipeline, watch_id: int) -> None:
    before = pipeline.checks_done(watch_id)
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.checks_done(watch_id) > before, timeout=60, message="the check")


def _checked_alerting(pipeline, watch_id: int, url: str) -> bool:
    """Check the watch once more; whether ``url`` has been alerted by now."""
    _wait_checks_now(pipeline, watch_id)
    return url in [alert["url"] for alert in pipeline.alert_lines()]


def test_links_whose_tracking_parameters_change_every_check_alert_nothing(pipeline, site):
    def links(check: int) -> list[tuple[str, str]]:
        return [(f"/story/{n}?utm_source=home&utm_content=slot{check}-{n}&fbclid={check}", f"Story {n}") for n in range(5)]
    url = site.add_page("/", links(0))
    watch_id = _add_watch(pipeline, url)
    pipeline.processor()
    pipeline.worker()
    for check in range(3):
        site.add_page("/", links(check))
        _wait_checks_now(pipeline, watch_id)
    assert pipeline.alert_lines() == []
    site.publish("/", "/story/new?utm_source=home", "New story")
    _wait_checks_now(pipeline, watch_id)
    assert [alert["url"] for alert in pipeline.alert_lines()] == [site.url("/story/new")]


def test_a_redesign_sends_exactly_one_alert(pipeline, site):
    url = site.add_page("/", [(f"/old/{n}", f"Old {n}") for n in range(25)])
    watch_id = _add_watch(pipeline, url)
    pipeline.processor()
    pipeline.worker()
    _wait_checks_now(pipeline, watch_id)
    site.add_page("/", [(f"/new/{n}", f"New {n}") for n in range(30)])  # every link renewed
    _wait_checks_now(pipeline, watch_id)
    [alert] = pipeline.alert_lines()
    assert alert["text"].startswith("layout changed: 30 of 30 links are new at once") and alert["url"] == url
    site.publish("/", "/new/30", "A real story")
    _wait_checks_now(pipeline, watch_id)
    assert [a["url"] for a in pipeline.alert_lines()][1:] == [site.url("/new/30")]

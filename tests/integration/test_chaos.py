"""Chaos: while 50 pages keep publishing links, kill workers, the processor and the scheduler
with SIGKILL at random moments and restart the RabbitMQ node once. When it settles, the
alerts at the JSON-lines sink are exactly the links published: none lost, none doubled."""
from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import Counter

import plyvel
import pytest

from monitor import amqp
from monitor.demo import LocalSite

from tests.helpers import wait_for

PAGES = 50
CHAOS_SECONDS = 40
SEED = int(os.environ.get("CHAOS_SEED", time.time()))


def _sink_alerts(pipeline) -> tuple[list[str], int]:
    """URLs of the alerts in alerts.jsonl, and the number of lines that are not whole JSON."""
    path = pipeline.config.alerts_path
    urls, torn = [], 0
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            urls.append(json.loads(line)["url"])
        except ValueError:
            torn += 1
    return urls, torn


def test_chaos_every_published_link_is_alerted_exactly_once(pipeline, rabbit, site):
    rng = random.Random(SEED)
    # job_timeout: a job dead-lettered by repeated kills is scheduled again soon;
    # politeness_delay: the 50 "sites" share one loopback host.
    pipeline.configure(job_timeout=20, politeness_delay=0.0)
    paths = [f"/site{n}/" for n in range(PAGES)]
    urls = [site.add_page(path, [(f"{path}old-{i}", f"Old {i}") for i in range(3)]) for path in paths]
    procs = {"scheduler": pipeline.scheduler(), "processor": pipeline.processor(),
             "worker_a": pipeline.worker("worker_a"), "worker_b": pipeline.worker("worker_b")}
    procs["master"] = pipeline.master_proc
    watch_ids = [pipeline.store.add_watch(url, 1).id for url in urls]
    wait_for(lambda: all(pipeline.watch(w).last_status == "ok" for w in watch_ids), timeout=180,
             message="every baseline")

    published: list[str] = []
    stop_publishing = threading.Event()

    def publisher() -> None:
        number = 0
        while not stop_publishing.wait(rng.uniform(0.02, 0.15)):
            path = rng.choice(paths)
            site.publish(path, f"{path}new-{number}", f"New story {number}")
            published.append(site.url(f"{path}new-{number}"))
            number += 1

    thread = threading.Thread(target=publisher, daemon=True)
    thread.start()
    kills: Counter[str] = Counter()
    broker_restarts = 0
    deadline = time.monotonic() + CHAOS_SECONDS
    restart_broker_at = time.monotonic() + CHAOS_SECONDS / 2
    try:
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.3, 2.0))  # chaos pacing, not waiting for a result
            if broker_restarts == 0 and time.monotonic() > restart_broker_at:
                rabbit.stop()
                rabbit.start()
                broker_restarts += 1
                continue
            name = rng.choice(sorted(procs))
            procs[name].kill(signal.SIGKILL)
            kills[name] += 1
            procs[name].start()  # what supervisord would do
    finally:
        stop_publishing.set()
        thread.join(10)
        if rabbit.proc is None:
            rabbit.start()

    expected = set(published)
    wait_for(lambda: set(_sink_alerts(pipeline)[0]) >= expected, timeout=180,
             message="every published link at the sink")
    # Two more full rounds of checks: nothing late may double an alert.
    for _ in range(2):
        marks = {w: pipeline.checks_done(w) for w in watch_ids}
        wait_for(lambda: all(pipeline.checks_done(w) > marks[w] for w in watch_ids), timeout=90,
                 message="another round of checks")

    alerted, torn = _sink_alerts(pipeline)
    duplicates = len(alerted) - len(set(alerted))
    lost = expected - set(alerted)
    unexpected = set(alerted) - expected
    print(f"\nchaos (seed {SEED}): published {len(expected)}, alerted {len(set(alerted))}, duplicates {duplicates}, "
          f"lost {len(lost)}, unexpected {len(unexpected)}, torn lines {torn}, "
          f"kills {sum(kills.values())} ({dict(kills)}), broker restarts {broker_restarts}")
    assert len(expected) > 100 and sum(kills.values()) >= 10
    assert (duplicates, len(lost), len(unexpected), torn) == (0, 0, 0, 0)

    # The stores agree with the sink and with each other after all those SIGKILLs.
    procs["processor"].kill(signal.SIGTERM)
    assert len(pipeline.store.alerts()) == len(expected)
    index = plyvel.DB(str(pipeline.config.leveldb_path))
    try:
        assert list(index.iterator(prefix=b"O")) == [], "no outbox record may be left behind"
        indexed = {url for key, value in index.iterator(prefix=b"L") for url, *_ in json.loads(value)}
    finally:
        index.close()
    stored = {link.url for w in watch_ids for link in pipeline.store.links(w)}
    assert indexed == stored


@pytest.fixture
def many_sites():
    """One site per loopback address: the pages of different hosts are fetched in parallel."""
    sites = [LocalSite(address=f"127.0.0.{n}").start() for n in range(2, 62)]
    yield sites
    for site in sites:
        site.stop()


def test_sigkill_of_a_worker_holding_dozens_of_unacked_jobs_loses_and_doubles_nothing(pipeline, many_sites):
    """A worker keeps many jobs in flight; killed with all of them unacked, every one is
    redelivered to another worker, and each new link is alerted exactly once."""
    pipeline.configure(worker_concurrency=100, politeness_delay=0.0)
    urls = [site.add_page("/", [("/old", "Old")]) for site in many_sites]
    pipeline.processor()
    doomed = pipeline.worker("doomed")
    watch_ids = [pipeline.store.add_watch(url, 3600).id for url in urls]
    for watch_id in watch_ids:
        pipeline.publish_job(watch_id)
    wait_for(lambda: all(pipeline.watch(w).last_status == "ok" for w in watch_ids), timeout=60, message="the baselines")

    marks = {w: pipeline.checks_done(w) for w in watch_ids}
    entered = [site.hold("/") for site in many_sites]
    for site in many_sites:
        site.publish("/", "/fresh", "Fresh story")
    for watch_id in watch_ids:
        pipeline.publish_job(watch_id)
    wait_for(lambda: all(event.is_set() for event in entered), timeout=30,
             message="the worker fetching every page at once")
    doomed.kill(signal.SIGKILL)
    for site in many_sites:
        site.release("/")

    rescuer = pipeline.worker("rescuer")
    wait_for(lambda: all(pipeline.checks_done(w) > marks[w] for w in watch_ids), timeout=90,
             message="every job redelivered and checked")
    expected = {site.url("/fresh") for site in many_sites}
    wait_for(lambda: set(_sink_alerts(pipeline)[0]) >= expected, timeout=30, message="every fresh link at the sink")
    alerted, torn = _sink_alerts(pipeline)
    assert sorted(alerted) == sorted(expected) and torn == 0, "each new link alerted exactly once, nothing else"
    assert rescuer.log_text().count('"redelivered": true') == len(many_sites)
    channel = pipeline.channel()
    wait_for(lambda: channel.queue_declare(amqp.JOB_QUEUE, passive=True).method.message_count == 0, timeout=10,
             message="an empty job queue")

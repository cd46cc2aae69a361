"""Poison messages end in dead_letter, never loop, and `monitor dlq` manages them."""
from __future__ import annotations

import dataclasses
import json
import signal
import time

import pika

from monitor import amqp
from monitor.homekey import HomeKey
from monitor.linkindex import LinkIndex
from monitor.messages import Heartbeat, LeaseRequest, Task
from tests.helpers import wait_for

PAGE = [("/a", "A story")]


def _dead_letters(pipeline) -> list[dict]:
    result = pipeline.cli("dlq", "list", "--json")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def _dead_count(channel) -> int:
    return channel.queue_declare(amqp.DEAD_LETTER, passive=True).method.message_count


def test_malformed_messages_are_dead_lettered_while_good_ones_flow(pipeline, site):
    pipeline.processor()
    worker = pipeline.worker()
    watch_id = pipeline.store.add_watch(site.add_page("/", PAGE), 3600).id
    channel = pipeline.channel()
    poison = {
        "not JSON": b"not json",
        "not an object": b"[1, 2]",
        "missing id": b'{"baseUrl": "http://x/"}',
        "wrong type": b'{"baseUrl": 5, "id": 1}',
        "oversize": b'{"baseUrl": "http://x/", "id": 1, "pad": "' + b"x" * (33 * 1024 * 1024) + b'"}',
    }
    for body in poison.values():
        amqp.publish(channel, amqp.JOB_QUEUE, body)
        amqp.publish(channel, amqp.TASK_QUEUE, body)
    pipeline.publish_job(watch_id)

    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the good job's result")
    wait_for(lambda: _dead_count(channel) == 2 * len(poison), timeout=60, message="every poison message in dead_letter")
    letters = _dead_letters(pipeline)
    assert sorted(letter["queue"] for letter in letters) == sorted([amqp.JOB_QUEUE, amqp.TASK_QUEUE] * len(poison))
    assert {letter["reason"] for letter in letters} == {"rejected"}
    log = worker.log_text()
    for reason in ("not JSON", "expected a JSON object", "missing field 'id'", "wrong type", "exceeds the"):
        assert reason in log, f"the worker's log does not explain {reason!r}"
    assert _dead_count(channel) == 2 * len(poison), "listing must not remove anything"

    purged = pipeline.cli("dlq", "purge")
    assert purged.returncode == 0 and f"purged {2 * len(poison)}" in purged.stdout
    assert _dead_count(channel) == 0


def test_a_job_that_keeps_killing_its_worker_is_dead_lettered_then_replayed(pipeline, site):
    pipeline.processor()
    worker = pipeline.worker()
    killer = pipeline.store.add_watch(site.add_page("/killer", PAGE), 3600).id
    healthy = pipeline.store.add_watch(site.add_page("/healthy", PAGE), 3600).id
    channel = pipeline.channel()
    pipeline.publish_job(killer)

    deliveries = 0
    while _dead_count(channel) == 0:
        entered = site.hold("/killer")
        if not entered.wait(5):
            break  # no redelivery came: the message must be in dead_letter by now
        deliveries += 1
        assert deliveries <= 10, "the poison job keeps looping"
        worker.kill(signal.SIGKILL)
        worker.start()
    wait_for(lambda: _dead_count(channel) == 1, timeout=30, message="the poison job in dead_letter")
    assert deliveries == 6, "a delivery limit of 5 allows 6 deliveries"
    [letter] = _dead_letters(pipeline)
    assert (letter["queue"], letter["reason"]) == (amqp.JOB_QUEUE, "delivery_limit")
    assert json.loads(letter["body"])["id"] == killer

    # The pipeline goes on with good work meanwhile.
    pipeline.publish_job(healthy)
    wait_for(lambda: pipeline.watch(healthy).last_status == "ok", timeout=60, message="the healthy watch")

    # Once the origin is fixed, replay brings the job back and it completes.
    site.release("/killer")
    replayed = pipeline.cli("dlq", "replay", letter["id"])
    assert replayed.returncode == 0 and "replayed 1" in replayed.stdout, replayed.stderr
    wait_for(lambda: pipeline.watch(killer).last_status == "ok", timeout=60, message="the replayed job")
    assert _dead_count(channel) == 0
    assert pipeline.cli("dlq", "replay", "no-such-id").returncode == 2


def test_hostile_control_messages_neither_stop_the_master_nor_break_a_worker(pipeline, site):
    """NaN cooldowns, huge pids, a lease for -1 proxies: each is refused with a logged
    reason; the master keeps serving and the worker keeps checking the host named."""
    pipeline.processor()
    worker = pipeline.worker()
    watch_id = pipeline.store.add_watch(site.add_page("/", PAGE), 3600).id
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.checks_done(watch_id) > 0, timeout=60, message="the first check")
    channel = pipeline.channel()
    bare = lambda data: json.dumps(data).replace('"NaN"', "NaN").encode()  # noqa: E731 - as Python's json writes it
    channel.basic_publish(amqp.HOST_EVENTS, "", bare({"host": "127.0.0.1", "until": "NaN", "reason": "x", "worker": "w"}))
    channel.basic_publish("", amqp.HEARTBEAT_QUEUE, bare({"worker": "w", "host": "h", "pid": 2**70, "started_at": 1}))
    channel.basic_publish("", amqp.HEARTBEAT_QUEUE, bare({"worker": "w", "host": "h", "pid": 9, "started_at": 1,
                                                           "proxies": [1]}))
    channel.basic_publish("", amqp.CONTROL_QUEUE, bare({"op": "lease", "worker": "thief", "count": -1}))
    wait_for(lambda: pipeline.master_proc.log_text().count("dropped") >= 3, timeout=30,
             message="the master refusing all three messages meant for it")

    before = pipeline.checks_done(watch_id)
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.checks_done(watch_id) > before, timeout=60, message="a check after the bad messages")
    assert pipeline.watch(watch_id).last_status == "ok"
    assert pipeline.master_proc.proc.poll() is None and worker.proc.poll() is None
    assert "w" not in {record.id for record in pipeline.store.list_workers()}


def test_an_outbox_record_that_keeps_failing_is_quarantined_and_blocks_nothing(pipeline, site):
    """A record SQLite refuses on every attempt (a lone surrogate, as an older version let
    through) is moved to dead_letter after three attempts; the tasks behind it go on."""
    watch_id = pipeline.store.add_watch(site.add_page("/", PAGE), 3600).id
    other_id = pipeline.store.add_watch(site.add_page("/other", PAGE), 3600).id
    poison = {"checks": [{"watch_id": watch_id, "base_url": site.url("/"), "checked_at": time.time(),
                          "status": "ok", "outcome": "ok", "validators": None, "http_status": 200, "elapsed_ms": 1,
                          "links": [{"url": site.url("/x"), "text": "\ud800", "code": "abcdef",
                                     "alert_id": f"{watch_id}-abcdef-0"}]}]}
    index = LinkIndex(pipeline.config.leveldb_path)
    index.commit({}, poison)
    index.close()

    pipeline.processor()
    for _ in range(3):  # each group first retries the outbox
        before = pipeline.checks_done(other_id)
        pipeline.publish_task(Task(site.url("/other"), other_id, []))
        wait_for(lambda: pipeline.checks_done(other_id) > before, timeout=30, message="the task behind the record")
    wait_for(lambda: "outbox" in pipeline.cli("dlq", "list").stdout, timeout=60, message="the quarantined record")
    listed = pipeline.cli("dlq", "list").stdout
    assert "apply failed: UnicodeEncodeError" in listed
    # (an empty page: "ok (no links found: ...)", not a baseline yet)
    assert pipeline.watch(other_id).last_status.startswith("ok"), "the tasks behind the record were applied"


def test_while_a_sink_cannot_write_the_task_is_held_then_applied_once(pipeline, site):
    """An infrastructure failure (here the alert file cannot be opened) is waited out: the
    task is neither requeued towards its delivery limit nor dead-lettered, and once the
    sink works again its alert is delivered exactly once."""
    watch_id = pipeline.store.add_watch(site.add_page("/", PAGE), 3600).id
    pipeline.processor()
    channel = pipeline.channel()
    pipeline.publish_task(Task(site.url("/"), watch_id, [{"url": site.url("/a"), "text": "A"}],
                               fetched_at=time.time()), channel)
    wait_for(lambda: pipeline.checks_done(watch_id) > 0, timeout=30, message="the baseline")
    pipeline.config.alerts_path.mkdir()  # opening it for appending now fails
    pipeline.publish_task(Task(site.url("/"), watch_id, [{"url": site.url("/a"), "text": "A"},
                                                         {"url": site.url("/b"), "text": "B"}],
                               fetched_at=time.time()), channel)
    log = pipeline.procs[-1]
    wait_for(lambda: log.log_text().count("holding the task") >= 2, timeout=30, message="the task held")
    pipeline.config.alerts_path.rmdir()
    wait_for(lambda: pipeline.alert_lines(), timeout=60, message="the alert once the sink works again")
    assert [line["url"] for line in pipeline.alert_lines()] == [site.url("/b")]
    assert _dead_count(channel) == 0
    assert "rejected" not in log.log_text()


def test_dead_letter_keeps_at_most_its_bound_dropping_the_oldest(pipeline):
    pipeline.configure(dead_letter_max=3)
    channel = pipeline.channel()
    for n in range(5):
        amqp.publish(channel, amqp.DEAD_LETTER, json.dumps({"n": n}).encode())
    master = pipeline.master()
    wait_for(lambda: _dead_count(channel) == 3, timeout=30, message="dead_letter trimmed to its bound")
    assert '"oldest dead letters dropped", "count": 2' in master.log_text()
    listed = pipeline.cli("dlq", "list", "--json").stdout.splitlines()
    assert [json.loads(json.loads(line)["body"])["n"] for line in listed] == [2, 3, 4]
    assert "at most 3 are kept" in pipeline.cli("dlq", "list").stderr


def test_a_task_for_no_issued_job_is_refused_and_records_nothing(pipeline, site):
    """A broker client without the home's key cannot invent results: no token, a made-up
    token, or another watch's token sends the task to dead_letter; nothing is recorded."""
    pipeline.processor()
    watch_id = pipeline.store.add_watch(site.add_page("/", PAGE), 3600).id
    other_id = pipeline.store.add_watch(site.add_page("/other", PAGE), 3600).id
    channel = pipeline.channel()
    forged = Task(site.url("/"), watch_id, [{"url": "https://attacker.example/", "text": "seeded"}], fetched_at=time.time())
    other_token = HomeKey.load(pipeline.config.home).token(other_id, time.time())
    for token in (None, "1700000000000." + "0" * 32, other_token):
        amqp.publish(channel, amqp.TASK_QUEUE, dataclasses.replace(forged, token=token).to_bytes())
    wait_for(lambda: _dead_count(channel) == 3, timeout=30, message="the three forged tasks in dead_letter")
    assert pipeline.checks_done(watch_id) == 0
    assert pipeline.cli("links", str(watch_id)).stdout.count("attacker.example") == 0
    assert pipeline.procs[-1].log_text().count("not for a job this home issued") == 3

    pipeline.publish_job(watch_id)  # a real job's task still goes through
    pipeline.worker()
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the issued job's result")


def test_a_control_message_in_hand_when_the_master_died_is_dropped_not_retried(pipeline):
    """The delivery limit of the control plane: a heartbeat or lease request redelivered
    (the master's last run ended holding it, perhaps because of it) is dropped unhandled."""
    connection = pika.BlockingConnection(pika.URLParameters(pipeline.config.broker_url))
    channel = connection.channel()
    amqp.declare_topology(channel, pipeline.config)
    channel.basic_publish("", amqp.HEARTBEAT_QUEUE, Heartbeat("ghost", "h", 9, 1.0).to_bytes())
    channel.basic_publish("", amqp.CONTROL_QUEUE, LeaseRequest("lease", "ghost", "9:1.0", count=1).to_bytes())
    for queue in (amqp.HEARTBEAT_QUEUE, amqp.CONTROL_QUEUE):
        method = wait_for(lambda: channel.basic_get(queue)[0], timeout=10, message=f"the message on {queue}")
        assert not method.redelivered
    connection.close()  # as a master dying with both in hand: the broker redelivers them

    master = pipeline.master()
    wait_for(lambda: master.log_text().count("redelivered message dropped") == 2, timeout=30,
             message="both redelivered messages dropped")
    assert "ghost" not in {record.id for record in pipeline.store.list_workers()}
    assert "proxies leased" not in master.log_text()
    assert master.proc.poll() is None

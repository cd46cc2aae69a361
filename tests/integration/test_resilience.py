"""Processes ride out a broker restart by themselves, stop cleanly on SIGTERM, and never
print a credential."""
from __future__ import annotations

import signal

import pika
import pytest

from monitor import amqp, broker
from tests.helpers import wait_for

PASSWORD = "Sup3r-Secret-Pw"


def _user_with_password(rabbit) -> str:
    """A broker account with a distinctive password, so any leak of it is visible."""
    try:
        broker.ctl(rabbit.config, "add_user", "monitor-user", PASSWORD)
    except broker.BrokerError as exc:
        assert "already exists" in str(exc), exc
    broker.ctl(rabbit.config, "set_permissions", "-p", "/", "monitor-user", ".*", ".*", ".*")
    return f"amqp://monitor-user:{PASSWORD}@127.0.0.1:{rabbit.config.amqp_port}/%2F"


def test_processes_reconnect_after_a_broker_restart_and_never_leak_the_password(pipeline, rabbit, site):
    pipeline.use_broker(_user_with_password(rabbit))
    url = site.add_page("/", [("/a", "A")])
    procs = [pipeline.scheduler(), pipeline.processor(), pipeline.worker()]
    watch_id = pipeline.store.add_watch(url, 1).id
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the baseline")

    rabbit.stop()
    try:
        site.publish("/", "/during-outage", "Published while the broker was down")
        refused = pipeline.cli("dlq", "list")
        assert refused.returncode == 1 and "cannot reach the broker" in refused.stderr
        assert "monitor-user:***@" in refused.stderr and PASSWORD not in refused.stderr
        status = pipeline.cli("status")
        # 1: no supervisord runs these processes (the test starts them itself)
        assert status.returncode == 1 and PASSWORD not in status.stdout + status.stderr
        wait_for(lambda: all("broker connection lost" in proc.log_text() for proc in procs[1:]),
                 timeout=30, message="the consumers to notice the outage")
    finally:
        rabbit.start()

    alerts = wait_for(pipeline.alert_lines, timeout=90, message="the alert after the broker came back")
    assert [a["url"] for a in alerts] == [site.url("/during-outage")]
    assert all(proc.proc.poll() is None for proc in procs), "no process may have died: reconnecting is their job"
    for proc in procs:
        assert PASSWORD not in proc.log_text(), f"{proc.name} logged the password"
    assert all("broker connected" in proc.log_text() for proc in procs)


def test_sigterm_lets_a_worker_finish_the_job_in_hand(pipeline, site):
    url = site.add_page("/slow", [("/a", "A")])
    processor = pipeline.processor()
    worker = pipeline.worker()
    watch_id = pipeline.store.add_watch(url, 3600).id
    entered = site.hold("/slow")
    pipeline.publish_job(watch_id)
    wait_for(entered.is_set, timeout=30, message="the worker to start fetching")

    worker.proc.send_signal(signal.SIGTERM)
    site.release("/slow")
    assert worker.proc.wait(30) == 0, "a worker stops cleanly within supervisord's stop wait"
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=30, message="the finished job's result")
    channel = pipeline.channel()
    assert channel.queue_declare(amqp.JOB_QUEUE, passive=True).method.message_count == 0, "the job was acked, not requeued"
    assert worker.log_text().count('"event": "checked"') == 1

    processor.proc.send_signal(signal.SIGTERM)
    assert processor.proc.wait(30) == 0


def test_the_local_node_has_its_own_user_and_refuses_guest(rabbit):
    """guest/guest is a password every local user knows: a new node gets a user of its own,
    its generated password readable by the stack's owner only."""
    credentials = rabbit.config.broker_credentials_path
    assert credentials.stat().st_mode & 0o777 == 0o600
    assert (rabbit.config.rabbitmq_dir / "rabbitmq.conf").stat().st_mode & 0o777 == 0o600
    user, password = credentials.read_text().strip().split(":", 1)
    assert rabbit.url.startswith(f"amqp://{user}:") and len(password) >= 32
    pika.BlockingConnection(pika.URLParameters(rabbit.url)).close()
    port = rabbit.config.local_amqp_port
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{port}/%2F")).close()

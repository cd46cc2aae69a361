"""The fetch worker: consume ``job_queue``, check the page through a rotated exit, publish
the task, then ack.

Run under supervisord (``numprocs`` = ``MONITOR_WORKERS``) or on any machine that can reach
the broker: ``python -m workers.worker``. It needs no database: proxies are leased from the
controller over RabbitMQ (``control`` queue), host cooldowns arrive on the ``host_events``
fanout, and a heartbeat thread reports to the controller every few seconds.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from urllib.parse import urlsplit

import pika
import requests

from monitor import amqp
from monitor import config as configuration
from monitor.check import task_from_error, task_from_page
from monitor.fetch import FetchError, fetch
from monitor.log import get_logger
from monitor.messages import Heartbeat, HostDisabled, InvalidMessage, Job, LeaseReply, LeaseRequest, Task
from workers.exits import Cooldowns, ExitPool, Politeness


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Worker:
    def __init__(self, config: configuration.Config, name: str) -> None:
        self.config = config
        self.name = name
        self.log = get_logger("worker")
        self.session = requests.Session()
        self.pool = ExitPool(self._lease, config.proxies_per_worker)
        self.cooldowns = Cooldowns()
        self.politeness = Politeness(config.politeness_delay)
        self.started_at = time.time()
        self.jobs_done = 0
        self.errors = 0
        self.current_job: str | None = None
        self.rpc: amqp.RpcClient | None = None
        self.channel = None
        self.events_queue: str | None = None

    # --- the control plane ----------------------------------------------------------------
    def on_connect(self, connection: pika.BlockingConnection, channel) -> None:
        """After every (re)connect: an RPC channel and this worker's queue on ``host_events``."""
        self.channel = channel
        self.rpc = amqp.RpcClient(connection)
        self.events_queue = self.rpc.channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
        self.rpc.channel.queue_bind(self.events_queue, amqp.HOST_EVENTS)

    def _lease(self, count: int, exclude: list[int], attempts: int = 3) -> LeaseReply:
        """Ask the master for proxies; a master restarting takes a moment, so ask a few times
        (a requeued job would use up one of its deliveries)."""
        request = LeaseRequest("lease", self.name, count, exclude).to_bytes()
        for attempt in range(1, attempts + 1):
            try:
                body = self.rpc.call(amqp.CONTROL_QUEUE, request)
                break
            except amqp.RpcTimeout:
                if attempt == attempts:
                    raise
        reply = LeaseReply.from_bytes(body)
        self.log.info("proxies leased", granted=len(reply.proxies), pool_size=reply.pool_size)
        return reply

    def _poll_host_events(self) -> None:
        while True:
            method, _, body = self.rpc.channel.basic_get(self.events_queue, auto_ack=True)
            if method is None:
                break
            try:
                event = HostDisabled.from_bytes(body)
            except InvalidMessage:
                continue
            self.cooldowns.disable(event.host, event.until)

    def _disable_host(self, host: str, reason: str) -> float:
        until = time.time() + self.config.host_cooldown
        self.cooldowns.disable(host, until)
        amqp.publish(self.channel, "", HostDisabled(host, until, reason, self.name).to_bytes(), exchange=amqp.HOST_EVENTS)
        self.pool.succeeded()  # this host's refusals say nothing about the exits for other hosts
        self.log.warning("host disabled", host=host, until=_iso(until), reason=reason)
        return until

    def heartbeat(self, state: str = "alive") -> Heartbeat:
        return Heartbeat(self.name, socket.gethostname(), os.getpid(), self.started_at, state, self.jobs_done,
                         self.errors, self.current_job, self.pool.report())

    # --- one job --------------------------------------------------------------------------------
    def on_job(self, channel, method, job: Job) -> None:
        """Handle one job: the job is acked only once its task is confirmed by the broker."""
        self.current_job = job.base_url
        try:
            self.pool.ensure()
            self.cooldowns.update(self.pool.disabled_hosts)
            self._poll_host_events()
            task = self.check(job)
        except amqp.RpcTimeout as exc:
            # Without an answer we cannot know whether fetching directly is allowed: retry later.
            self.log.warning("controller unavailable, job requeued", reason=str(exc), watch_id=job.id)
            channel.basic_nack(method.delivery_tag, requeue=True)
            self.current_job = None
            time.sleep(1.0)
            return
        amqp.publish(channel, amqp.TASK_QUEUE, task.to_bytes())
        channel.basic_ack(method.delivery_tag)
        self.jobs_done += 1
        self.errors += task.status == "error"
        self.current_job = None
        self.log.info("checked", watch_id=job.id, url=job.base_url, status=task.status, error=task.error,
                      links=len(task.context), elapsed_ms=task.elapsed_ms, redelivered=method.redelivered)

    def check(self, job: Job) -> Task:
        """Fetch through the exits, rotating on refusals, and extract; or skip a host in cooldown."""
        host = urlsplit(job.base_url).hostname or ""
        fetched_at = time.time()
        until = self.cooldowns.disabled_until(host)
        if until is not None:
            return self._skipped(job, until, fetched_at)
        last_error = "every exit was flagged as recently refused"
        while True:
            exit = self.pool.pick()
            if exit is None and self.pool.lease_more():
                exit = self.pool.pick()
            if exit is None:
                return self._skipped(job, self._disable_host(host, f"every exit refused: {last_error}"), fetched_at)
            self.politeness.wait(exit, host)
            self.pool.used(exit)
            try:
                page = fetch(job.base_url, self.config, self.session, exit.url)
            except FetchError as exc:
                if not exc.refusal:
                    self.pool.succeeded()  # the exit worked; the site answered with an error
                    return task_from_error(job, exc, fetched_at, self.name)
                last_error = str(exc)
                self.pool.refused(exit, last_error)
                self.log.info("exit refused, rotating", host=host, exit=exit.name, reason=last_error)
                continue
            self.pool.succeeded()
            return task_from_page(job, page, self.config, fetched_at, self.name)

    def _skipped(self, job: Job, until: float, fetched_at: float) -> Task:
        return Task(job.base_url, job.id, [], status="skipped", error=f"host disabled until {_iso(until)}",
                    fetched_at=fetched_at, worker=self.name)

    def release(self) -> None:
        """Give the leased proxies back (on a clean stop)."""
        if self.rpc is not None and self.pool.proxy_ids():
            try:
                self.rpc.call(amqp.CONTROL_QUEUE, LeaseRequest("release", self.name).to_bytes(), timeout=2.0)
            except (amqp.RpcTimeout, *amqp.RECOVERABLE):
                pass  # the controller takes them back when the heartbeats stop


def send_heartbeats(worker: Worker, stop: threading.Event) -> None:
    """Publish a heartbeat every ``heartbeat_interval`` seconds on a connection of its own, so
    a long fetch never silences it; a last one with state ``stopped`` on the way out."""
    connection = None
    while True:
        stopping = stop.wait(worker.config.heartbeat_interval)
        try:
            if connection is None or not connection.is_open:
                connection = amqp.connect(worker.config, worker.log, attempts=1)
                channel = connection.channel()
            channel.basic_publish("", amqp.HEARTBEAT_QUEUE, worker.heartbeat("stopped" if stopping else "alive").to_bytes())
        except (amqp.BrokerUnavailable, *amqp.RECOVERABLE):
            connection = None
        if stopping:
            break
    if connection is not None and connection.is_open:
        connection.close()


def main() -> None:
    config = configuration.load()
    name = os.environ.get("SUPERVISOR_PROCESS_NAME") or f"worker-{os.getpid()}"
    worker = Worker(config, f"{socket.gethostname()}/{name}")
    stop = amqp.stop_on_signals()
    beats = threading.Thread(target=send_heartbeats, args=(worker, stop), daemon=True)
    beats.start()
    worker.log.info("starting", worker=worker.name, prefetch=config.worker_concurrency)
    amqp.run_consumer(config, amqp.JOB_QUEUE, config.worker_concurrency, Job, worker.on_job, worker.log, stop,
                      on_connect=worker.on_connect, on_stop=worker.release)
    beats.join(5)


if __name__ == "__main__":
    main()

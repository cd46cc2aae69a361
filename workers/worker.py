"""The fetch worker: consume ``job_queue``, check each page through a rotated exit, publish
the task, and ack the job once the broker has confirmed its task.

Run under supervisord (``numprocs`` = ``MONITOR_WORKERS``) or on any machine that can reach
the broker: ``python -m workers.worker``. It needs no database: proxies are leased from the
controller over RabbitMQ (:mod:`workers.control`), host cooldowns are pushed on the
``host_events`` fanout, and a heartbeat thread reports to the controller every few seconds.

Concurrency: a page takes 0.2-1 s of network and server time and a few milliseconds of CPU,
so each worker keeps ``worker_concurrency`` jobs in flight. The job stream runs on its own
connection and I/O thread (:mod:`monitor.async_amqp`: prefetch window, windowed publisher
confirms, acks sent by that thread, AMQP heartbeats never starved by a long job); fetching
and parsing run in a pool of threads, never two fetches at once for the same host
(:mod:`workers.dispatch`), and no more parses at once than there are cores.
"""
from __future__ import annotations

import dataclasses
import os
import resource
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from monitor import amqp
from monitor import config as configuration
from monitor.async_amqp import AsyncClient, Delivery
from monitor.check import task_from_error, task_from_page
from monitor.fetch import Connections, FetchError, fetch
from monitor.log import describe, get_logger
from monitor.messages import MAX_MESSAGE_BYTES, Heartbeat, HostDisabled, InvalidMessage, Job, Task, run_id
from monitor.urls import redact
from workers.control import UNAVAILABLE, ControlLink
from workers.dispatch import HostQueues
from workers.exits import Cooldowns, Exit, ExitPool, Politeness

def open_file_limit(wanted: int) -> int:
    """Raise this process's open-file limit towards ``wanted`` as far as the hard limit
    allows (no privilege needed); return the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Worker:
    def __init__(self, config: configuration.Config, name: str) -> None:
        self.config = config
        self.name = name
        self.log = get_logger("worker")
        self.started_at = time.time()
        self.control = ControlLink(config, name, run_id(os.getpid(), self.started_at), self.log)
        self.exits_lock = threading.Lock()  # guards the exit pool
        self.cooldowns = Cooldowns(config.host_cooldown)
        self.pool = ExitPool(self.control, config.proxies_per_worker, cooldowns=self.cooldowns)
        self.politeness = Politeness(config.politeness_delay)
        self.client = AsyncClient(config, self.log, consume=(amqp.JOB_QUEUE, config.worker_concurrency, self.on_delivery),
                                  subscribe=[(amqp.HOST_EVENTS, self.on_host_event)], owner=False)
        self.fetchers = ThreadPoolExecutor(config.worker_concurrency, thread_name_prefix="fetch")
        self.hosts: HostQueues[tuple[Job, Delivery]] = HostQueues()
        # Idle keep-alive connections to the hosts checked most recently: one file descriptor
        # each, so as many as the open-file limit leaves room for beside the jobs in flight.
        files = open_file_limit(10 * config.worker_concurrency + 200)
        self.connections = Connections(config, hosts=max(10, min(10 * config.worker_concurrency,
                                                                  files - 2 * config.worker_concurrency - 100)))
        # Parsing is CPU work under the GIL: more parses at once than cores gain nothing and
        # would hold that many parse trees in memory at once.
        self.parse_slots = threading.BoundedSemaphore(os.cpu_count() or 2)
        self.counters_lock = threading.Lock()
        self.in_hand = 0  # deliveries received and not yet acked, nacked or dropped
        self.settled = threading.Condition(self.counters_lock)
        self.jobs_done = 0
        self.errors = 0
        self.current_job: str | None = None

    # --- the job stream ---------------------------------------------------------------------
    def on_delivery(self, delivery: Delivery) -> None:
        """In the I/O thread: validate, then hand the job to a fetch thread."""
        try:
            job = Job.from_bytes(delivery.body)
        except InvalidMessage as exc:
            self.log.warning("message rejected to dead_letter", queue=amqp.JOB_QUEUE, reason=str(exc))
            self.client.nack(delivery, requeue=False)
            return
        with self.counters_lock:
            self.in_hand += 1
        host = urlsplit(job.base_url).hostname or ""
        if self.hosts.admit(host, (job, delivery)):
            self.fetchers.submit(self.run, host, job, delivery)

    def run(self, host: str, job: Job, delivery: Delivery) -> None:
        """In a fetch thread: this job, then the jobs that waited for its host."""
        while True:
            self._run_one(job, delivery)
            following = self.hosts.done(host)
            if following is None:
                return
            job, delivery = following

    def _run_one(self, job: Job, delivery: Delivery) -> None:
        if delivery.generation != self.client.generation:
            self._settled()  # the connection it came on is gone: the broker has requeued it
            return
        self.current_job = redact(job.base_url)  # heartbeats show it: never a watch's password
        try:
            task = self.check(job)
        except UNAVAILABLE as exc:
            # Without the controller we cannot know whether fetching directly is allowed: retry later.
            self.log.warning("controller unavailable, job requeued", reason=str(exc)[:200], watch_id=job.id)
            time.sleep(1.0)
            self.client.nack(delivery, requeue=True)
            self._settled()
            return
        except Exception as exc:  # any surprise ends as this watch's status, never as a dead worker
            self.log.error("check failed", exc_info=True, watch_id=job.id)
            task = Task(job.base_url, job.id, [], status="error", error=describe(exc),
                        fetched_at=time.time(), worker=self.name)
        task = dataclasses.replace(task, token=job.token)  # the processor applies only issued jobs' tasks
        body = task.to_bytes()
        if len(body) > MAX_MESSAGE_BYTES:  # the broker and the processor would refuse it
            task = dataclasses.replace(task, context=[], status="error", content_hash=None,
                                       error=f"the page's links make a task of {len(body)} bytes, over {MAX_MESSAGE_BYTES}")
            body = task.to_bytes()
        self.client.publish(amqp.TASK_QUEUE, body, lambda ok: self._published(job, delivery, task, ok),
                            delivery=delivery)

    def _published(self, job: Job, delivery: Delivery, task: Task, ok: bool) -> None:
        """In the I/O thread: the task is confirmed (ack the job) or not (the job comes back)."""
        if ok:
            self.client.ack(delivery)
            self.log.info("checked", watch_id=job.id, url=redact(job.base_url), status=task.status, error=task.error,
                          links=len(task.context), elapsed_ms=task.elapsed_ms, redelivered=delivery.redelivered)
        else:
            self.client.nack(delivery, requeue=True)
        with self.counters_lock:
            self.jobs_done += ok
            self.errors += ok and task.status == "error"
        self._settled()

    def _settled(self) -> None:
        with self.counters_lock:
            self.in_hand -= 1
            self.settled.notify_all()

    # --- one check through the exits ----------------------------------------------------------
    def on_host_event(self, body: bytes) -> None:
        """In the I/O thread: the controller disabled a host, or an operator lifted one."""
        try:
            event = HostDisabled.from_bytes(body)
        except InvalidMessage:
            return
        if event.until <= time.time():
            self.cooldowns.lift(event.host)
            self.log.info("host enabled again", host=event.host, by=event.worker)
        else:
            self.cooldowns.disable(event.host, event.until)

    def check(self, job: Job) -> Task:
        """Fetch through the exits, rotating on refusals, and extract; or skip a host in cooldown."""
        host = urlsplit(job.base_url).hostname or ""
        fetched_at = time.time()
        with self.exits_lock:
            self.pool.ensure()
        tried: set[int] = set()  # exits this job used
        refused: list[int] = []  # ... and those the site refused
        last_error = "no exit to try"
        try:
            while True:
                exit = self._next_exit(host, tried, refused)
                if exit is None:
                    until = self.cooldowns.disabled_until(host)
                    if until is not None:
                        return self._skipped(job, until, fetched_at)
                    return task_from_error(job, FetchError(f"no exit left to try: {last_error}"), fetched_at, self.name)
                self.politeness.wait(exit, host)
                try:
                    page = fetch(job.base_url, self.config, self.connections, exit.url, job.etag, job.last_modified)
                except FetchError as exc:
                    if not (exc.refusal or exc.proxy_failed):
                        return task_from_error(job, exc, fetched_at, self.name)  # the site's own error
                    last_error = str(exc)
                    self._blame(exit, exc, host, refused)
                    continue
                with self.parse_slots:
                    return task_from_page(job, page, self.config, fetched_at, self.name)
        finally:
            with self.exits_lock:
                extras = self.pool.extras()
            if extras:
                self.control.release([exit.id for exit in extras])
                self.connections.drop([exit.url for exit in extras])

    def _next_exit(self, host: str, tried: set[int], refused: list[int]) -> Exit | None:
        """The exit to try next for ``host``: one this job has not tried, else one more from
        the controller (which may disable the host instead); None when the host is in
        cooldown or no exit is left."""
        if self.cooldowns.disabled_until(host) is not None:
            return None
        with self.exits_lock:
            exit = self.pool.pick(tried)
            if exit is None:
                self.pool.more(host, refused)  # its reply's disable list goes to the cooldowns
                exit = self.pool.pick(tried)
            if exit is not None and self.cooldowns.disabled_until(host) is None:
                tried.add(exit.id)
                self.pool.used(exit)
                return exit
        return None

    def _blame(self, exit: Exit, exc: FetchError, host: str, refused: list[int]) -> None:
        """A refusal counts against the exit for this host; a failed proxy is dropped."""
        with self.exits_lock:
            if exc.proxy_failed:
                self.pool.failed(exit, str(exc))
                self.connections.drop([exit.url])
            else:
                self.pool.refused(exit, str(exc))
                refused.append(exit.id)
        self.log.info("exit refused, rotating" if exc.refusal else "proxy failed, dropped", host=host,
                      exit=exit.name, reason=str(exc))

    def _skipped(self, job: Job, until: float, fetched_at: float) -> Task:
        return Task(job.base_url, job.id, [], status="skipped", error=f"host disabled until {_iso(until)}",
                    fetched_at=fetched_at, worker=self.name)

    # --- heartbeats and the life cycle ---------------------------------------------------------
    def heartbeat(self, state: str = "alive") -> Heartbeat:
        with self.exits_lock:
            proxies = self.pool.report()
        with self.counters_lock:
            done, errors, busy = self.jobs_done, self.errors, self.in_hand
        return Heartbeat(self.name, socket.gethostname(), os.getpid(), self.started_at, state, done, errors,
                         self.current_job if busy else None, proxies)

    def send_heartbeats(self, stop: threading.Event) -> None:
        """Every ``heartbeat_interval`` seconds, and once more (``stopped``) on the way out."""
        while True:
            stopping = stop.wait(self.config.heartbeat_interval)
            try:
                self.control.beat(self.heartbeat("stopped" if stopping else "alive"))
            except UNAVAILABLE:
                pass  # the next beat tries again on a new connection
            if stopping:
                return

    def serve(self, stop: threading.Event, drain_timeout: float = 50.0) -> None:
        """Work until ``stop`` is set; then finish the jobs in hand (within ``drain_timeout``),
        give the proxies back and close (unfinished jobs return to the queue)."""
        self.log.info("starting", worker=self.name, concurrency=self.config.worker_concurrency)
        self.client.start()
        stop.wait()
        self.client.cancel_consumer()
        with self.settled:
            self.settled.wait_for(lambda: self.in_hand <= 0, timeout=drain_timeout)
        self.client.stop()
        self.fetchers.shutdown(wait=False, cancel_futures=True)
        with self.exits_lock:
            leased = bool(self.pool.proxy_ids())
        if leased:
            self.control.release()
        self.log.info("stopped", jobs_done=self.jobs_done)


def main() -> None:
    config = configuration.load()
    name = os.environ.get("SUPERVISOR_PROCESS_NAME") or f"worker-{os.getpid()}"
    worker = Worker(config, f"{socket.gethostname()}/{name}")
    stop = amqp.stop_on_signals()
    beats = threading.Thread(target=worker.send_heartbeats, args=(stop,), daemon=True)
    beats.start()
    worker.serve(stop)
    beats.join(5)
    worker.control.close()


if __name__ == "__main__":
    main()

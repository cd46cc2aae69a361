"""The scheduler: every second, publish each due, enabled watch to ``job_queue``.

A watch is published as ``{"baseUrl", "id"}`` (persistent, confirmed), then marked in
flight; it is not published again until its result arrives or ``job_timeout`` passes.
Due times lie on a per-watch phase grid (``store.next_slot``), so restarts and bulk
imports never fire every watch at once.
"""
from __future__ import annotations

import time
from urllib.parse import urlsplit

import schedule

from monitor import amqp
from monitor import config as configuration
from monitor.log import get_logger
from monitor.messages import Job
from monitor.store import Store, Watch, open_store
from monitor.urls import redact

BATCH = 2000  # watches published per tick at most; the rest stay due for the next tick


def interleave_by_host(watches: list[Watch]) -> list[Watch]:
    """Round-robin over hosts (the patent's mixed ordering), so one host's many watches
    never go out as a burst; within a host, the most overdue first."""
    by_host: dict[str, list[Watch]] = {}
    for watch in watches:
        by_host.setdefault(urlsplit(watch.url).hostname or "", []).append(watch)
    queues = list(by_host.values())
    mixed = []
    for rank in range(max(map(len, queues), default=0)):
        mixed.extend(queue[rank] for queue in queues if rank < len(queue))
    return mixed


class Scheduler:
    def __init__(self, config: configuration.Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.log = get_logger("scheduler")
        self.connection = None
        self.channel = None
        self.retry_at = 0.0
        self.backoff = 0.5

    def _channel(self):
        """The publishing channel, (re)connecting with capped exponential backoff between ticks."""
        if self.channel is not None and self.channel.is_open:
            return self.channel
        if time.monotonic() < self.retry_at:
            return None
        try:
            self.connection = amqp.connect(self.config, self.log, attempts=1)
            self.channel = amqp.open_channel(self.connection, self.config)
            if self.backoff > 0.5:
                self.log.info("broker connected", broker=redact(self.config.broker_url))
            self.backoff = 0.5
            return self.channel
        except (amqp.BrokerUnavailable, *amqp.RECOVERABLE) as exc:
            self.log.warning("broker unavailable", reason=str(exc), retry_in_s=self.backoff)
            self.retry_at = time.monotonic() + self.backoff
            self.backoff = min(self.backoff * 2, 15.0)
            return None

    def tick(self) -> int:
        """Publish the due watches; return how many were published."""
        now = time.time()
        due = self.store.due_watches(now, self.config.job_timeout, BATCH)
        channel = self._channel()
        if channel is None:
            return 0
        published: list[int] = []
        try:
            # Keeps the idle connection's heartbeats flowing between publishes.
            self.connection.process_data_events(0)
            for watch in interleave_by_host(due):
                amqp.publish(channel, amqp.JOB_QUEUE, Job(watch.url, watch.id, now).to_bytes())
                published.append(watch.id)
        except (amqp.PublishFailed, *amqp.RECOVERABLE) as exc:
            self.log.warning("publishing interrupted", reason=str(exc), published=len(published))
            self.channel = None
        # One transaction for the whole tick; a crash before it only means the same watches
        # are published again, which the processor absorbs.
        self.store.mark_in_flight(published, now)
        if published:
            self.log.info("enqueued", jobs=len(published), due=len(due))
        return len(published)


def main() -> None:
    config = configuration.load()
    stop = amqp.stop_on_signals()
    store = open_store(config.db_path)
    scheduler = Scheduler(config, store)
    schedule.every(1).seconds.do(scheduler.tick)
    scheduler.log.info("starting", broker="local" if config.local_broker else "external")
    while not stop.is_set():
        schedule.run_pending()
        stop.wait(0.2)
    store.close()
    scheduler.log.info("stopped")


if __name__ == "__main__":
    main()

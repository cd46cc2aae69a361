"""The scheduler: ten times a second, publish each due, enabled watch to ``job_queue``.

A watch is marked in flight, then published as ``{"baseUrl", "id", "enqueued_at", "token"}``
with its CSS selector, the validators of its last check and a token signed with the home's key, without which
the processor applies no task (persistent, confirmed); a job the broker did not confirm
is due again at once. A watch in flight is not published again until its result arrives,
so ``job_queue`` holds at most one job per watch, however far behind the fleet falls.
A job lost on the way (dead-lettered, or its task was) is published again once it has been
in flight for ``job_timeout`` *and* no job is waiting in ``job_queue`` (while jobs wait, a
job in flight that long may simply still be waiting its turn): the watch counts a failure,
shows it in its status, and backs off (``job_timeout`` doubling per failure in a row, at
most a day), so a job that kills every worker it reaches is not fetched forever.
Due times lie on a per-watch phase grid (``store.next_slot``), so restarts and bulk
imports never fire every watch at once.
"""
from __future__ import annotations

import functools
import threading
import time
from urllib.parse import urlsplit

import schedule

from monitor import amqp
from monitor import config as configuration
from monitor.async_amqp import AsyncClient
from monitor.homekey import HomeKey
from monitor.log import get_logger
from monitor.messages import Job
from monitor.store import Store, Watch, open_store

TICK = 0.1  # seconds between looks for due watches (a due query and one queue-depth round trip)
BATCH = 5000  # watches published per round; a full round is followed by another at once
CONFIRM_TIMEOUT = 30.0  # seconds to wait for a round's confirms (the connection is lost by then)


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
    """Publishes due watches: all of a tick's jobs go out at once, and the tick waits for
    the broker's confirms together (windowed confirms), not one round trip per job."""

    def __init__(self, config: configuration.Config, store: Store, client: AsyncClient) -> None:
        self.config = config
        self.store = store
        self.client = client
        self.key = HomeKey.load(config.home)
        self.log = get_logger("scheduler")

    def tick(self) -> int:
        """Publish the due watches (repeating while a whole batch was due); return how many."""
        total = 0
        while self.client.ready.is_set():
            published = self._publish_due()
            total += published
            if published < BATCH:
                break
        return total

    def _publish_due(self) -> int:
        now = time.time()
        if self.client.ready_count(amqp.JOB_QUEUE) == 0:  # nothing waits: a job in flight that long is lost
            for watch_id, failures in self.store.time_out_jobs(now, self.config.job_timeout):
                self.log.warning("no result within job_timeout: backing off", watch_id=watch_id, failures=failures)
        due = self.store.due_watches(now, BATCH)
        if not due:
            return 0
        # Marked in flight before publishing: a fast fleet may report the result before the
        # confirm arrives here, and a later mark would then hold the watch for job_timeout.
        self.store.mark_in_flight([watch.id for watch in due], now)
        failed: list[int] = []
        outstanding = len(due)
        all_confirmed = threading.Event()
        lock = threading.Lock()

        def confirmed(watch_id: int, ok: bool) -> None:
            nonlocal outstanding
            with lock:
                if not ok:
                    failed.append(watch_id)
                outstanding -= 1
                if outstanding == 0:
                    all_confirmed.set()

        for watch in interleave_by_host(due):
            job = Job(watch.url, watch.id, now, watch.etag, watch.last_modified, watch.content_hash,
                      self.key.token(watch.id, now), watch.selector or None)
            self.client.publish(amqp.JOB_QUEUE, job.to_bytes(), functools.partial(confirmed, watch.id))
        if not all_confirmed.wait(CONFIRM_TIMEOUT):
            self.log.warning("confirms overdue: unconfirmed jobs count as published", outstanding=outstanding)
        with lock:
            retry = list(failed)
        if retry:
            # Not published after all: due again at the next tick.
            self.store.clear_in_flight(retry, now)
            self.log.warning("publishing interrupted", failed=len(retry), published=len(due) - len(retry))
        if len(due) > len(retry):
            self.log.info("enqueued", jobs=len(due) - len(retry))
        return len(due) - len(retry)


def main() -> None:
    config = configuration.load()
    stop = amqp.stop_on_signals()
    store = open_store(config.db_path)
    log = get_logger("scheduler")
    client = AsyncClient(config, log).start()
    scheduler = Scheduler(config, store, client)
    schedule.every(TICK).seconds.do(scheduler.tick)
    log.info("starting", broker="local" if config.local_broker else "external")
    while not stop.is_set() and client.conflict is None:
        schedule.run_pending()
        stop.wait(TICK / 2)
    client.stop()
    store.close()
    if client.conflict is not None:
        raise SystemExit(2)
    log.info("stopped")


if __name__ == "__main__":
    main()

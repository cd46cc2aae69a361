"""Scheduler throughput: due watches published to ``job_queue`` with publisher confirms.

Starts a private RabbitMQ node, fills a fresh SQLite watch list with ``--watches`` watches
that are all due, and times one scheduler tick (the real :class:`controller.scheduler.Scheduler`
over the real async client: windowed confirms, marks in flight) until every job is confirmed,
``--runs`` times. Prints jobs/s per run and the median. Figures only.

    .venv/bin/python bench/scheduler.py --watches 20000 --runs 3
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pika  # noqa: E402

from controller.scheduler import Scheduler  # noqa: E402
from monitor import amqp  # noqa: E402
from monitor.async_amqp import AsyncClient  # noqa: E402
from monitor.config import Config  # noqa: E402
from monitor.log import get_logger  # noqa: E402
from monitor.store import open_store  # noqa: E402
from tests.integration.conftest import Node  # noqa: E402


def fill(store, count: int) -> None:
    """``count`` watches on as many hosts, all due now."""
    now = time.time()
    with store.transaction() as conn:
        conn.executemany("INSERT INTO watches (url, interval_s, created_at, next_due) VALUES (?, 3600, ?, ?)",
                         [(f"https://site{i}.example/", now, now - 1) for i in range(count)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watches", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="monitor-bench-scheduler-"))
    node = Node(home / "rabbitmq")
    node.start()
    client = None
    try:
        config = Config(home=home, amqp_url=node.url)
        store = open_store(config.db_path)
        fill(store, args.watches)
        client = AsyncClient(config, get_logger("bench")).start()
        if not client.ready.wait(30):
            raise SystemExit("the async client did not connect")
        scheduler = Scheduler(config, store, client)
        channel = pika.BlockingConnection(pika.URLParameters(node.url)).channel()
        rates = []
        for run in range(1, args.runs + 1):
            channel.queue_purge(amqp.JOB_QUEUE)
            with store.transaction() as conn:
                conn.execute("UPDATE watches SET in_flight_since = NULL")
            start = time.perf_counter()
            published = scheduler.tick()
            seconds = time.perf_counter() - start
            queued = channel.queue_declare(amqp.JOB_QUEUE, passive=True).method.message_count
            rates.append(published / seconds)
            print(f"run {run}: {published} jobs confirmed in {seconds:.2f}s = {rates[-1]:,.0f} jobs/s "
                  f"(job_queue holds {queued})")
        print(f"scheduler: median {statistics.median(rates):,.0f} jobs/s published with confirms "
              f"({args.watches} watches, {args.runs} runs)")
    finally:
        if client is not None:
            client.stop()
        node.stop()


if __name__ == "__main__":
    main()

"""Overload: a fleet with half the capacity its watch list needs.

``--pages`` sites (each response held 0.5 s by the origin) are watched every
``--interval`` seconds by ONE worker with ``worker_concurrency = --concurrency``: it can
check concurrency / 0.5 s pages a second, half of what the watch list asks for. While it
runs (``--seconds``), 10 pages gain 3 links every 10 seconds. Printed: the most jobs
``job_queue`` ever held (sampled twice a second) against the number of watches, the checks
per second achieved, ``monitor status`` in the middle of the overload, and, once the
publishing stops and the fleet catches up, whether every new link was alerted exactly once.
``job_timeout`` is set below the time a job waits, so a scheduler that published a watch
again on a timeout would pile jobs up. Figures only.

    .venv/bin/python bench/overload.py --pages 400 --interval 25 --concurrency 4 --seconds 120
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pika  # noqa: E402

from bench.common import Stack, wait_until  # noqa: E402
from bench.origin import Origin  # noqa: E402
from monitor import amqp  # noqa: E402
from monitor import config as configuration  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--interval", type=int, default=25, help="seconds between checks of a watch")
    parser.add_argument("--concurrency", type=int, default=4, help="fetches in flight in the one worker")
    parser.add_argument("--seconds", type=float, default=120)
    args = parser.parse_args()

    origin = Origin(args.pages, delay=(0.5, 0.5)).start()
    capacity, needed = args.concurrency / 0.5, args.pages / args.interval
    print(f"{args.pages} watches every {args.interval}s need {needed:.0f} checks/s; the fleet can do about {capacity:.0f}/s")
    stack = Stack([origin.url(i) for i in range(args.pages)], 1, {
        "politeness_delay": 0.0, "worker_concurrency": args.concurrency, "job_timeout": args.interval // 2,
    }, interval=f"{args.interval}s")
    rng = random.Random(3)
    expected: set[str] = set()
    try:
        config = configuration.load({"MONITOR_HOME": str(stack.home)})
        channel = pika.BlockingConnection(pika.URLParameters(config.broker_url)).channel()
        wait_until(lambda: stack.store.conn.execute("SELECT COUNT(*) FROM watches WHERE last_status = 'ok'")
                   .fetchone()[0] == args.pages, 600, "the baselines")
        checks_before = stack.store.conn.execute("SELECT COALESCE(SUM(count), 0) FROM check_counts").fetchone()[0]
        start = time.monotonic()
        most, generation, status = 0, 0, ""
        while time.monotonic() - start < args.seconds:
            if time.monotonic() - start >= generation * 10:
                generation += 1
                for page in rng.sample(range(args.pages), 10):
                    expected.update(origin.mutate(page, 3, generation))
            most = max(most, channel.queue_declare(amqp.JOB_QUEUE, passive=True).method.message_count)
            if not status and time.monotonic() - start > args.seconds / 2:
                status = stack.status()
            time.sleep(0.5)
        elapsed = time.monotonic() - start
        checks = stack.store.conn.execute("SELECT COALESCE(SUM(count), 0) FROM check_counts").fetchone()[0] - checks_before
        print(f"job_queue held at most {most} jobs (ready) for {args.pages} watches; "
              f"{checks / elapsed:.1f} checks/s achieved over {elapsed:.0f}s")
        print("\n`monitor status` halfway through:\n" + status)
        alerted = lambda: [row[0] for row in stack.store.conn.execute("SELECT url FROM alerts")]  # noqa: E731
        caught_up = wait_until(lambda: set(alerted()) >= expected, 600, "every new link")
        urls = alerted()
        print(f"new links: {len(expected)} published, {len(set(urls) & expected)} alerted "
              f"({caught_up:.0f}s after the publishing stopped), {len(urls) - len(set(urls))} duplicates, "
              f"{len(set(urls) - expected)} unexpected")
    finally:
        stack.close()
        origin.stop()


if __name__ == "__main__":
    main()

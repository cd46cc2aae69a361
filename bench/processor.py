"""Processor throughput through AMQP, and its memory as the link index grows.

Starts a private RabbitMQ node and the real processor process on a fresh home with
``--watches`` watches. Tasks are published to ``task_queue`` while the processor is
stopped; it is then started, and the time from its "consuming" log line to the last
check it records is the processing time.

* ``rounds`` (default): a baseline round (every link new) and a re-check round (3 new
  links per page, the rest known): links/s for each.
* ``--grow N``: keeps publishing pages of fresh links until the index holds N links and
  prints the processor's RSS at every million (``--max-seconds`` caps the run).

    .venv/bin/python bench/processor.py --watches 1000 --links 300
    .venv/bin/python bench/processor.py --grow 10000000
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pika  # noqa: E402

from bench.common import memory_mb  # noqa: E402
from monitor import amqp  # noqa: E402
from monitor.homekey import HomeKey  # noqa: E402
from monitor.messages import Task  # noqa: E402
from monitor.store import open_store  # noqa: E402
from tests.integration.conftest import Node  # noqa: E402


def rss(pid: int) -> str:
    """RSS, and its split: anonymous memory (the heap) and file pages (LevelDB maps its table
    files: those pages are the kernel's page cache, reclaimable, and grow with the index)."""
    fields = memory_mb(pid)
    return f"RSS {fields['VmRSS']} MB (anonymous {fields['RssAnon']} MB, mapped files {fields['RssFile']} MB)"


class Bench:
    def __init__(self, watches: int) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="monitor-bench-processor-"))
        self.node = Node(self.home / "rabbitmq")
        self.node.start()
        self.store = open_store(self.home / "monitor.sqlite3")
        with self.store.transaction() as conn:
            conn.executemany("INSERT INTO watches (url, interval_s, created_at, next_due) VALUES (?, 3600, 0, 0)",
                             [(f"https://site{i}.example/",) for i in range(watches)])
        self.watch_ids = [row[0] for row in self.store.conn.execute("SELECT id FROM watches ORDER BY id")]
        self.env = dict(os.environ, MONITOR_HOME=str(self.home), AMQP_URL=self.node.url,
                        MONITOR_CONFIG=str(self.home / "none.toml"))
        (self.home / "none.toml").write_text("")
        connection = pika.BlockingConnection(pika.URLParameters(self.node.url))
        self.channel = connection.channel()
        amqp.declare_topology(self.channel, self.node.config)
        self.proc: subprocess.Popen | None = None
        self.log_path = self.home / "processor.log"

    def publish(self, tasks: list[Task]) -> None:
        """Publish ``tasks`` as workers would for issued jobs (signed with the home's key)."""
        key, now = HomeKey.load(self.home), time.time()
        for task in tasks:
            body = dataclasses.replace(task, token=key.token(task.id, now)).to_bytes()
            self.channel.basic_publish("", amqp.TASK_QUEUE, body, pika.BasicProperties(delivery_mode=2))
        self.channel.queue_declare(amqp.TASK_QUEUE, passive=True)  # a round trip: every publish has arrived

    def start(self) -> float:
        """Start the processor; return the time it started consuming."""
        self.proc = subprocess.Popen([sys.executable, "-m", "controller.processor"], env=self.env, cwd=REPO,
                                     stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for line in self.log_path.read_text().splitlines()[::-1]:
                if '"event": "consuming"' in line and f'"pid": {self.proc.pid}' in line:
                    return datetime.fromisoformat(json.loads(line)["ts"].replace("Z", "+00:00")).timestamp()
            time.sleep(0.05)
        raise SystemExit("the processor did not start consuming")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
            self.proc = None

    def wait_drained(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while self.channel.queue_declare(amqp.TASK_QUEUE, passive=True).method.message_count or self._unacked():
            if time.monotonic() > deadline:
                raise SystemExit("the processor did not drain task_queue in time")
            time.sleep(0.1)

    def _unacked(self) -> bool:
        checked = self.store.conn.execute("SELECT COALESCE(SUM(count), 0) FROM check_counts").fetchone()[0]
        return checked < self.expected_checks

    def last_check(self) -> float:
        return self.store.conn.execute("SELECT MAX(last_check) FROM watches").fetchone()[0]

    def round(self, tasks: list[Task], label: str) -> float:
        """Publish with the processor stopped, then time it through the tasks; return links/s."""
        self.stop()
        self.publish(tasks)
        self.expected_checks = getattr(self, "expected_checks", 0) + len(tasks)
        started = self.start()
        self.wait_drained()
        seconds = self.last_check() - started
        links = sum(len(task.context) for task in tasks)
        alerts = self.store.conn.execute("SELECT COUNT(*) FROM alerts").fetchone()[0]
        print(f"{label}: {len(tasks)} tasks, {links:,} links in {seconds:.2f}s = {links / seconds:,.0f} links/s "
              f"({len(tasks) / seconds:,.0f} tasks/s); alerts so far {alerts}; processor {rss(self.proc.pid)}")
        return links / seconds

    def close(self) -> None:
        self.stop()
        self.node.stop()


def page(watch_id: int, links: int, generation: int, fresh: int = 0) -> Task:
    """A task for ``watch_id``: ``links`` stable links plus ``fresh`` new ones of ``generation``."""
    context = [{"url": f"https://site{watch_id}.example/news/{generation}/fresh-{j}", "text": f"Fresh story {j}"}
               for j in range(fresh)]
    context += [{"url": f"https://site{watch_id}.example/section/story-{j}-a-slug-of-usual-length",
                 "text": f"A headline of usual length, number {j}"} for j in range(links)]
    return Task(f"https://site{watch_id}.example/", watch_id, context)


def rounds(bench: Bench, links: int) -> None:
    bench.round([page(w, links, 0) for w in bench.watch_ids], "baseline round (every link new)")
    bench.round([page(w, links, 1, fresh=3) for w in bench.watch_ids], "re-check round (3 new links per page)")


def grow(bench: Bench, target: int, links: int, max_seconds: float) -> None:
    started = time.monotonic()
    indexed, generation = 0, 0
    bench.round([page(w, 0, 0, fresh=1) for w in bench.watch_ids], "baselines")
    while indexed < target and time.monotonic() - started < max_seconds:
        million = indexed // 1_000_000
        tasks = []
        while indexed // 1_000_000 == million and indexed < target:
            generation += 1
            tasks.extend(page(w, 0, generation, fresh=links) for w in bench.watch_ids)
            indexed += links * len(bench.watch_ids)
        bench.round(tasks, f"index at {indexed:,} links")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watches", type=int, default=1000)
    parser.add_argument("--links", type=int, default=300, help="links per page")
    parser.add_argument("--grow", type=int, default=0, help="grow the index to this many links, printing RSS")
    parser.add_argument("--max-seconds", type=float, default=1800)
    args = parser.parse_args()
    bench = Bench(args.watches)
    try:
        if args.grow:
            grow(bench, args.grow, args.links, args.max_seconds)
        else:
            rounds(bench, args.links)
    finally:
        bench.close()


if __name__ == "__main__":
    main()

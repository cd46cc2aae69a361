"""Worker memory with many fetches in flight.

Starts a private RabbitMQ node, the master and ONE worker process with
``worker_concurrency = --in-flight``, and ``--sites`` local sites, each on its own
loopback address (127.0.x.y: a host of its own) serving one page of ``--links`` links.
Every page is held open by its site, so the worker ends up with exactly ``--in-flight``
fetches hanging at once; the worker's RSS is read at that moment, then the pages are
released and read again once every task is published. Prints figures only.

    .venv/bin/python bench/worker_memory.py --in-flight 200 --sites 250
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pika  # noqa: E402

from bench.common import memory_mb, wait_until  # noqa: E402
from monitor import amqp  # noqa: E402
from monitor.demo import LocalSite  # noqa: E402
from monitor.messages import Job  # noqa: E402
from tests.integration.conftest import Node  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=200)
    parser.add_argument("--sites", type=int, default=250)
    parser.add_argument("--links", type=int, default=300)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="monitor-bench-memory-"))
    (home / "monitor.toml").write_text(f"worker_concurrency = {args.in_flight}\npoliteness_delay = 0.0\n")
    node = Node(home / "rabbitmq")
    node.start()
    sites = [LocalSite(address=f"127.0.{1 + n // 250}.{1 + n % 250}").start() for n in range(args.sites)]
    procs: list[subprocess.Popen] = []
    try:
        env = dict(os.environ, MONITOR_HOME=str(home), AMQP_URL=node.url, MONITOR_ALLOW_PRIVATE="1",
                   MONITOR_CONFIG=str(home / "monitor.toml"))
        for module in ("controller.master", "workers.worker"):
            log = open(home / f"{module}.log", "ab")
            procs.append(subprocess.Popen([sys.executable, "-m", module], env=env, cwd=REPO, stdout=log,
                                          stderr=subprocess.STDOUT))
        worker = procs[-1]
        channel = pika.BlockingConnection(pika.URLParameters(node.url)).channel()
        channel.confirm_delivery()
        amqp.declare_topology(channel, node.config)
        entered = []
        for n, site in enumerate(sites):
            url = site.add_page("/", [(f"/section/{n}/story-{j}-with-a-long-slug-as-news-sites-have", f"Headline {j}: "
                                       "a sentence of the length news headlines have") for j in range(args.links)])
            entered.append(site.hold("/"))
            amqp.publish(channel, amqp.JOB_QUEUE, Job(url, n + 1, time.time()).to_bytes())
        idle = memory_mb(worker.pid)["VmRSS"]
        wait_until(lambda: sum(event.is_set() for event in entered) >= args.in_flight, 120,
                   f"{args.in_flight} fetches in flight")
        time.sleep(1.0)  # let every hanging request settle into its thread
        in_flight = sum(event.is_set() for event in entered)
        holding = memory_mb(worker.pid)["VmRSS"]
        for site in sites:
            site.release("/")
        wait_until(lambda: channel.queue_declare(amqp.TASK_QUEUE, passive=True).method.message_count >= args.sites,
                   300, "every task")
        print(f"worker RSS: {idle:.0f} MB at start, {holding:.0f} MB with {in_flight} fetches in flight, "
              f"peak {memory_mb(worker.pid)['VmHWM']:.0f} MB after parsing {args.sites} pages of {args.links} links")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(60)
        for site in sites:
            site.stop()
        node.stop()


if __name__ == "__main__":
    main()

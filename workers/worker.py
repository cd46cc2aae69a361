"""The fetch worker: consume ``job_queue``, check the page, publish the task, then ack.

Run under supervisord (``numprocs`` = ``MONITOR_WORKERS``) or on any machine that can reach
the broker: ``python -m workers.worker``. It needs no database.
"""
from __future__ import annotations

import os
import socket

import requests

from monitor import amqp, config as configuration
from monitor.check import check_page
from monitor.log import get_logger
from monitor.messages import Job


class Worker:
    def __init__(self, config: configuration.Config, name: str) -> None:
        self.config = config
        self.name = name
        self.log = get_logger("worker")
        self.session = requests.Session()

    def on_job(self, channel, method, job: Job) -> None:
        """Handle one job: the job is acked only once its task is confirmed by the broker."""
        task = check_page(job, self.config, self.session, worker=self.name)
        amqp.publish(channel, amqp.TASK_QUEUE, task.to_bytes())
        channel.basic_ack(method.delivery_tag)
        self.log.info("checked", watch_id=job.id, url=job.base_url, status=task.status, error=task.error,
                      links=len(task.context), elapsed_ms=task.elapsed_ms, redelivered=method.redelivered)


def main() -> None:
    config = configuration.load()
    name = os.environ.get("SUPERVISOR_PROCESS_NAME") or f"worker-{os.getpid()}"
    worker = Worker(config, f"{socket.gethostname()}/{name}")
    stop = amqp.stop_on_signals()
    worker.log.info("starting", worker=worker.name, prefetch=config.worker_prefetch)
    amqp.run_consumer(config, amqp.JOB_QUEUE, config.worker_prefetch, Job, worker.on_job, worker.log, stop)


if __name__ == "__main__":
    main()

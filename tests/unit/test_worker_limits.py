"""What a worker publishes always fits the broker's and the processor's message limit."""
from __future__ import annotations

from pathlib import Path

import pytest

from monitor.async_amqp import Delivery
from monitor.config import Config
from monitor.messages import Job, Task
from workers import worker as worker_module


class RecordingClient:
    generation = 0

    def __init__(self) -> None:
        self.published: list[bytes] = []

    def publish(self, queue: str, body: bytes, on_confirm, delivery=None) -> None:
        self.published.append(body)


def test_a_task_over_the_message_limit_is_published_as_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(worker_module, "MAX_MESSAGE_BYTES", 5_000)
    worker = worker_module.Worker(Config(home=tmp_path), "w")
    job = Job("https://news.example/", 7)
    links = [{"url": f"https://news.example/{n}", "text": "x" * 300} for n in range(50)]
    worker.check = lambda job: Task(job.base_url, job.id, links, fetched_at=1.0)
    worker.client = RecordingClient()
    worker._run_one(job, Delivery(job.to_bytes(), 1, False, 0))
    [body] = worker.client.published
    task = Task.from_bytes(body)
    assert len(body) < 5_000 and (task.status, task.context) == ("error", [])
    assert task.error.startswith("the page's links make a task of ") and task.error.endswith("over 5000")
    worker.fetchers.shutdown()

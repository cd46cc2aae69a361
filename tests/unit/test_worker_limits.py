"""What a worker publishes always fits the broker's and the processor's message limit."""
from __future__ import annotations

import subprocess
import sys
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


@pytest.mark.parametrize("soft, hard, wanted, granted", [(256, 4096, 1200, 1200), (256, 512, 1200, 512),
                                                          (2048, 4096, 1200, 2048)])
def test_a_worker_raises_its_open_file_limit_as_far_as_allowed(soft: int, hard: int, wanted: int, granted: int):
    """Keep-alive connections need file descriptors: the worker raises its soft limit up to
    the hard one itself (a supervisord `minfds` would refuse to start where the hard limit is low)."""
    code = ("import resource; from workers.worker import open_file_limit; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard})); "
            f"print(open_file_limit({wanted}), resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[2]).stdout.split()
    assert output == [str(granted), str(granted)]

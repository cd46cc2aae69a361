"""Real parts for integration tests: a private RabbitMQ node, a local HTTP origin, and the
pipeline's processes started as real OS processes (killable with SIGKILL)."""
from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pika
import pytest

from monitor import amqp
from monitor import broker as local_broker
from monitor.config import Config
from monitor.config import load as load_config
from monitor.demo import LocalSite
from monitor.homekey import HomeKey
from monitor.log import get_logger
from monitor.messages import Job, Task
from monitor.store import open_store
from tests.fleet import RationingOrigin, TinyProxy
from tests.helpers import wait_for

REPO = Path(__file__).resolve().parents[2]


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _answers(url: str) -> bool:
    """Whether an HTTP server accepts connections at ``url``."""
    host, port = url.split("//")[1].rstrip("/").rsplit(":", 1)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1):
            return True
    except OSError:
        return False


def free_broker_port() -> int:
    """An AMQP port whose epmd (+5000) and distribution (+10000) companions are free too."""
    for _ in range(200):
        port = random.randint(10000, 14999)
        if all(_free(p) for p in (port, port + 5000, port + 10000)):
            return port
    raise RuntimeError("no free port triple for a RabbitMQ node")


class Node:
    """A private RabbitMQ node in the foreground, started the way supervisord starts it."""

    def __init__(self, home: Path) -> None:
        self.config = Config(home=home, amqp_port=free_broker_port())
        local_broker.prepare(self.config)
        self.url = self.config.broker_url  # with the credentials prepare() generated
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        local_broker.ensure_epmd(self.config, wait_for_supervised=0)
        env = dict(os.environ, MONITOR_HOME=str(self.config.home), MONITOR_AMQP_PORT=str(self.config.amqp_port))
        env.pop("AMQP_URL", None)
        log = open(self.config.home / "rabbitmq.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "monitor.broker"], env=env, cwd=REPO,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self.accepts_connections, timeout=90, message="the RabbitMQ node to accept AMQP", interval=0.5)

    def accepts_connections(self) -> bool:
        try:
            pika.BlockingConnection(pika.URLParameters(self.url)).close()
            return True
        except pika.exceptions.AMQPError:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the RabbitMQ node exited with {self.proc.returncode}; see {self.config.home}/rabbitmq.log")
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None

    def reset_queues(self) -> None:
        """Delete the pipeline's queues (and the home's claim) so each test starts from an empty topology."""
        connection = pika.BlockingConnection(pika.URLParameters(self.url))
        channel = connection.channel()
        for queue in (amqp.JOB_QUEUE, amqp.TASK_QUEUE, amqp.DEAD_LETTER, amqp.CONTROL_QUEUE, amqp.HEARTBEAT_QUEUE,
                      amqp.HOME_QUEUE):
            channel.queue_delete(queue)
        connection.close()


@pytest.fixture(scope="session")
def rabbit(tmp_path_factory):
    node = Node(tmp_path_factory.mktemp("rabbitmq"))
    node.start()
    yield node
    node.stop()
    local_broker.stop_epmd(node.config)


class Proc:
    """One pipeline process (``python -m MODULE``) with its log file; restartable, killable."""

    def __init__(self, module: str, env: dict[str, str], log_dir: Path, name: str) -> None:
        self.module, self.env, self.name = module, env, name
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Proc":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", self.module], env=self.env, cwd=self.env["MONITOR_HOME"],
                                     stdout=log, stderr=subprocess.STDOUT)
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)

    def restart(self) -> "Proc":
        self.kill()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Pipeline:
    """A test's own MONITOR_HOME, store and processes, connected to the shared node."""

    def __init__(self, home: Path, rabbit: Node) -> None:
        self.home = home
        self.env = dict(os.environ, MONITOR_HOME=str(home), AMQP_URL=rabbit.url, MONITOR_ALLOW_PRIVATE="1",
                        PYTHONPATH=str(REPO), MONITOR_CONFIG=str(home / "monitor.toml"))
        self.configure()
        self.config = Config(home=home, amqp_url=rabbit.url, allow_private=True)
        self.store = open_store(self.config.db_path)
        self.procs: list[Proc] = []
        self.connections: list = []
        self.master_proc: Proc | None = None

    def use_broker(self, url: str) -> None:
        """Point this pipeline's processes (spawned after this call) at another broker URL."""
        self.env["AMQP_URL"] = url
        self.config = dataclasses.replace(self.config, amqp_url=url)

    def configure(self, **settings: float | int) -> None:
        """Write the processes' monitor.toml (before spawning them). The test pages are
        small: a first check with one link is their baseline unless a test says otherwise."""
        settings = {"baseline_min_links": 1, **settings}
        (self.home / "monitor.toml").write_text("".join(f"{key} = {value!r}\n" for key, value in settings.items()))

    def spawn(self, module: str, name: str) -> Proc:
        proc = Proc(module, self.env, self.home, name).start()
        self.procs.append(proc)
        return proc

    def worker(self, name: str = "worker") -> Proc:
        """A worker, and the master it leases its exits from (started once)."""
        if self.master_proc is None:
            self.master_proc = self.master()
        return self.spawn("workers.worker", name)

    def processor(self) -> Proc:
        return self.spawn("controller.processor", "processor")

    def scheduler(self) -> Proc:
        return self.spawn("controller.scheduler", "scheduler")

    def master(self) -> Proc:
        return self.spawn("controller.master", "master")

    def notifier(self) -> Proc:
        return self.spawn("controller.notifier", "notifier")

    def web(self) -> Proc:
        """The web front, answering on ``self.config.web_url`` once it has started."""
        proc = self.spawn("monitor.web.server", "web")
        wait_for(lambda: _answers(self.web_url) or proc.proc.poll() is not None, timeout=30,
                 message="the web front listening (or exiting)")
        return proc

    @property
    def web_url(self) -> str:
        """Where this pipeline's web front listens (its home's derived port, or MONITOR_WEB_BIND)."""
        return load_config(self.env).web_url

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "monitor.cli", *args], env=self.env, cwd=self.home,
                              capture_output=True, text=True, timeout=60)

    def watch(self, watch_id: int):
        return self.store.get_watch(watch_id)

    def checks_done(self, watch_id: int) -> float:
        return self.watch(watch_id).last_check or 0.0

    def alert_lines(self) -> list[dict]:
        path = self.config.alerts_path
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def channel(self):
        """A confirming channel on the test's broker, closed at teardown."""
        connection = amqp.connect(self.config, get_logger("test"), attempts=3)
        self.connections.append(connection)
        return amqp.open_channel(connection, self.config)

    def publish_job(self, watch_id: int) -> None:
        """Publish a job for ``watch_id`` as the scheduler would (signed with the home's key)."""
        now = time.time()
        job = Job(self.watch(watch_id).url, watch_id, now, token=HomeKey.load(self.config.home).token(watch_id, now))
        amqp.publish(self.channel(), amqp.JOB_QUEUE, job.to_bytes())

    def publish_task(self, task: Task, channel=None) -> None:
        """Publish ``task`` as a worker would for a job the scheduler issued (a valid token)."""
        token = HomeKey.load(self.config.home).token(task.id, time.time())
        amqp.publish(channel or self.channel(), amqp.TASK_QUEUE, dataclasses.replace(task, token=token).to_bytes())

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill(signal.SIGTERM)
        for connection in self.connections:
            if connection.is_open:
                connection.close()
        self.store.close()


@pytest.fixture
def pipeline(tmp_path, rabbit):
    rabbit.reset_queues()
    line = Pipeline(tmp_path, rabbit)
    yield line
    line.stop()


@pytest.fixture
def site():
    origin = LocalSite().start()
    yield origin
    origin.stop()


@pytest.fixture
def proxies(tmp_path):
    started: list[TinyProxy] = []

    def start(*names: str, credentials: tuple[str, str] | None = None) -> list[TinyProxy]:
        new = [TinyProxy(name, tmp_path, credentials) for name in names]
        started.extend(new)
        return new
    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture
def rationing():
    origins: list[RationingOrigin] = []

    def start(allowance: int) -> RationingOrigin:
        origins.append(RationingOrigin(allowance))
        return origins[-1]
    yield start
    for origin in origins:
        origin.stop()

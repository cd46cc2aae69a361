"""The whole stack under real supervisord, with its own local RabbitMQ node, from `monitor up`."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import REPO, free_broker_port

PROGRAMS = {"epmd", "rabbitmq", "scheduler", "processor", "worker:worker_00", "worker:worker_01"}


@pytest.fixture
def stack_env(tmp_path):
    env = dict(os.environ, MONITOR_HOME=str(tmp_path / "home"), MONITOR_ALLOW_PRIVATE="1",
               MONITOR_AMQP_PORT=str(free_broker_port()), MONITOR_WORKERS="2", MONITOR_CONFIG=str(tmp_path / "none.toml"))
    env.pop("AMQP_URL", None)
    (tmp_path / "none.toml").write_text("")
    yield env
    subprocess.run([sys.executable, "-m", "monitor.cli", "down"], env=env, cwd=REPO, timeout=180)


def monitor(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def _status(env) -> dict:
    result = monitor(env, "status", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _running(env) -> dict[str, int]:
    return {p["name"]: p["pid"] for p in _status(env)["processes"] if p["state"] == "RUNNING"}


def test_monitor_up_runs_everything_and_survives_kill_9(stack_env, site):
    assert monitor(stack_env, "up").returncode == 0
    running = wait_for(lambda: (r := _running(stack_env)).keys() >= PROGRAMS and r, timeout=60,
                       message="every program RUNNING")

    human = monitor(stack_env, "status")
    assert human.returncode == 0
    for name in ("rabbitmq", "scheduler", "processor", "worker:worker_00", "job_queue", "task_queue"):
        assert name in human.stdout

    url = site.add_page("/", [("/one", "One")])
    added = monitor(stack_env, "watch", "add", url, "--interval", "1s")
    assert added.returncode == 0, added.stderr
    watch_id = re.search(r"added watch (\d+)", added.stdout).group(1)
    wait_for(lambda: "ok" in monitor(stack_env, "watch", "list").stdout, timeout=90, message="the baseline check")

    # kill -9 a worker and the processor: supervisord restarts them and the pipeline carries on.
    for name in ("worker:worker_00", "processor"):
        os.kill(running[name], signal.SIGKILL)
        wait_for(lambda: _running(stack_env).get(name) not in (None, running[name]), timeout=30,
                 message=f"{name} restarted by supervisord")
    site.publish("/", "/two", "Two")
    alerts = wait_for(lambda: monitor(stack_env, "alerts", "--json").stdout.splitlines(), timeout=60, message="the alert")
    assert [(json.loads(line)["url"], json.loads(line)["watch_id"]) for line in alerts] == [(site.url("/two"), int(watch_id))]

    assert monitor(stack_env, "down").returncode == 0
    assert "not running" in monitor(stack_env, "status").stdout

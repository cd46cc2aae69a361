"""The whole stack under real supervisord, with its own local RabbitMQ node, from `monitor up`."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import REPO, free_broker_port

PROGRAMS = {"epmd", "rabbitmq", "scheduler", "processor", "master", "notifier", "web", "worker:worker_00",
            "worker:worker_01"}


def _env(tmp_path, **extra) -> dict[str, str]:
    env = dict(os.environ, MONITOR_HOME=str(tmp_path / "home"), MONITOR_ALLOW_PRIVATE="1",
               MONITOR_AMQP_PORT=str(free_broker_port()), MONITOR_WORKERS="2", MONITOR_CONFIG=str(tmp_path / "none.toml"))
    env.pop("AMQP_URL", None)
    env.update(extra)
    # The test pages have a link or two: a first check with one link is their baseline.
    (tmp_path / "none.toml").write_text("baseline_min_links = 1\n")
    return env


@pytest.fixture
def stack_env(tmp_path):
    env = _env(tmp_path)
    yield env
    subprocess.run([sys.executable, "-m", "monitor.cli", "down"], env=env, cwd=REPO, timeout=180)


@pytest.fixture
def external_stack_env(tmp_path, rabbit):
    rabbit.reset_queues()
    env = _env(tmp_path, AMQP_URL=rabbit.url, MONITOR_WORKERS="1")
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


def _add_watch(env, url: str) -> int:
    added = monitor(env, "watch", "add", url, "--interval", "1s")
    assert added.returncode == 0, added.stderr
    return int(re.search(r"added watch (\d+)", added.stdout).group(1))


def _alerts(env) -> list[tuple[str, int]]:
    return [(alert["url"], alert["watch_id"]) for alert in map(json.loads, monitor(env, "alerts", "--json").stdout.splitlines())]


def _health(env) -> tuple[int, dict]:
    """The web front's /healthz, as a monitoring system reads it (503 is an answer too)."""
    try:
        with urllib.request.urlopen(_status(env)["web"] + "healthz", timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_monitor_up_runs_everything_and_survives_kill_9(stack_env, site):
    assert monitor(stack_env, "up").returncode == 0
    running = wait_for(lambda: (r := _running(stack_env)).keys() >= PROGRAMS and r, timeout=60,
                       message="every program RUNNING")

    human = monitor(stack_env, "status")
    assert human.returncode == 0
    for name in ("rabbitmq", "scheduler", "processor", "worker:worker_00", "job_queue", "task_queue"):
        assert name in human.stdout

    watch_id = _add_watch(stack_env, site.add_page("/", [("/one", "One")]))
    wait_for(lambda: "ok" in monitor(stack_env, "watch", "list").stdout, timeout=90, message="the baseline check")

    # kill -9 a worker and the processor: supervisord restarts them and the pipeline carries on.
    for name in ("worker:worker_00", "processor"):
        os.kill(running[name], signal.SIGKILL)
        wait_for(lambda: _running(stack_env).get(name) not in (None, running[name]), timeout=30,
                 message=f"{name} restarted by supervisord")
    site.publish("/", "/two", "Two")
    assert wait_for(lambda: _alerts(stack_env), timeout=60, message="the alert") == [(site.url("/two"), watch_id)]

    # /healthz judges supervisord's programs: a program down makes the pipeline stuck.
    status, health = wait_for(lambda: (h := _health(stack_env))[0] == 200 and h, timeout=30,
                              message="/healthz healthy with everything running")
    assert health["processes"]["processor"] == health["processes"]["web"] == "RUNNING"
    assert monitor(stack_env, "ctl", "stop", "notifier").returncode == 0
    status, health = _health(stack_env)
    assert (status, health["status"], health["reasons"]) == (503, "stuck", ["process notifier is STOPPED"])
    assert monitor(stack_env, "ctl", "start", "notifier").returncode == 0
    wait_for(lambda: _health(stack_env)[0] == 200, timeout=30, message="/healthz healthy again")

    assert monitor(stack_env, "down").returncode == 0
    stopped = monitor(stack_env, "status")
    assert stopped.returncode == 1 and "not running" in stopped.stdout

    # Started again, `up` returns only once everything is connected, and the runs it
    # replaced are not counted as this run's workers.
    assert monitor(stack_env, "up").returncode == 0
    status = _status(stack_env)
    assert {p["state"] for p in status["processes"] if p["name"] in PROGRAMS} == {"RUNNING"}
    assert set(status["queues"]) >= {"job_queue", "task_queue", "dead_letter"}
    assert status["workers"] == {"alive": 2, "lost": 0, "stopped": 0}


def test_with_an_external_broker_the_local_node_is_not_started(external_stack_env, site):
    env = external_stack_env
    assert monitor(env, "up").returncode == 0
    wait_for(lambda: _running(env).keys() >= {"scheduler", "processor", "worker:worker_00"}, timeout=60,
             message="the pipeline RUNNING")
    states = {p["name"]: p["state"] for p in _status(env)["processes"]}
    assert states["rabbitmq"] == "STOPPED" and states["epmd"] == "STOPPED"

    watch_id = _add_watch(env, site.add_page("/", [("/one", "One")]))
    wait_for(lambda: "ok" in monitor(env, "watch", "list").stdout, timeout=60, message="the baseline check")
    site.publish("/", "/two", "Two")
    assert wait_for(lambda: _alerts(env), timeout=60, message="the alert") == [(site.url("/two"), watch_id)]


def test_stack_with_three_proxies_and_two_workers(stack_env, proxies, rationing):
    env = stack_env
    origin = rationing(allowance=1000)
    assert monitor(env, "db", "upgrade").returncode == 0  # the home, before the stack runs
    for proxy in proxies("p1", "p2", "p3"):
        assert monitor(env, "proxy", "add", proxy.url, "--no-test").returncode == 0
    assert monitor(env, "up").returncode == 0
    wait_for(lambda: _running(env).keys() >= PROGRAMS, timeout=60, message="every program RUNNING")
    for n in range(6):
        assert monitor(env, "watch", "add", origin.url(f"/page{n}"), "--interval", "2s").returncode == 0

    def fleet() -> list[dict]:
        return [json.loads(line) for line in monitor(env, "workers", "--json").stdout.splitlines()]
    def leases() -> list[list[int]]:
        return [sorted(w["proxies"]) for w in fleet() if w["state"] == "alive"]
    wait_for(lambda: len(leases()) == 2 and {p for held in leases() for p in held} == {1, 2, 3}, timeout=90,
             message="two live workers holding the three proxies between them")
    wait_for(lambda: monitor(env, "watch", "list").stdout.count(" ok ") >= 6, timeout=90, message="every page checked")
    assert set(origin.served) <= {"p1", "p2", "p3"} and len(origin.served) >= 2, dict(origin.served)
    assert [len(held) for held in leases()] == [2, 2], "two each: the least shared proxy is shared"
    status = monitor(env, "status").stdout
    assert "workers: 2 alive" in status and "costliest sites:" in status


def test_the_demo_alerts_soon_says_how_it_stops_and_does(tmp_path):
    env = _env(tmp_path)
    started = time.monotonic()
    demo = subprocess.Popen([sys.executable, "-m", "monitor.cli", "demo", "--every", "2", "--duration", "45"], env=env,
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(150, demo.kill)  # bounds the read below if the demo never stops
    watchdog.start()
    lines: list[tuple[float, str]] = []
    try:
        for line in demo.stdout:
            lines.append((time.monotonic() - started, line.rstrip()))
        demo.wait(timeout=10)
    finally:
        watchdog.cancel()
        if demo.poll() is None:
            demo.kill()
        subprocess.run([sys.executable, "-m", "monitor.cli", "down"], env=dict(env, MONITOR_HOME=str(tmp_path / "home" / "demo")),
                       cwd=REPO, timeout=180)
    text = "\n".join(line for _, line in lines)
    assert demo.returncode == 0, text
    assert "stops after 45s, or Ctrl-C" in text and "Ctrl-C to stop" not in text
    first_alert = next(at for at, line in lines if "  NEW  " in line)
    print(f"demo: first alert {first_alert:.1f}s after start")
    assert lines[-1][1].startswith("demo stopped"), "it stopped by itself, as it said"

"""Start, stop and inspect the whole stack through supervisord (``monitor up/down/status/ctl``)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import xmlrpc.client
from pathlib import Path

import pika
from supervisor.xmlrpc import SupervisorTransport

from monitor import amqp, broker
from monitor.config import Config
from monitor.log import get_logger
from monitor.store import open_store

REPO = Path(__file__).resolve().parent.parent
CONF = Path(os.environ.get("MONITOR_SUPERVISORD_CONF", REPO / "supervisord.conf"))


class StackError(RuntimeError):
    """supervisord could not be started, reached or stopped."""


def _tool(name: str) -> str:
    """A console script of this virtualenv (supervisord, supervisorctl)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def stack_env(config: Config) -> dict[str, str]:
    """The environment supervisord.conf expands, derived from the configuration."""
    env = dict(os.environ)
    env.update({
        "MONITOR_HOME": str(config.home),
        "MONITOR_CWD": os.getcwd(),
        "MONITOR_PYTHON": sys.executable,
        "MONITOR_WORKERS": str(max(1, config.workers)),
        "MONITOR_LOCAL_BROKER": "true" if config.local_broker else "false",
        "MONITOR_EPMD_PORT": str(broker.epmd_port(config)),
        "MONITOR_AMQP_PORT": str(config.local_amqp_port),
        "MONITOR_ALLOW_PRIVATE": "1" if config.allow_private else "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    })
    if config.amqp_url:
        env["AMQP_URL"] = config.amqp_url
    return env


def _rpc(config: Config):
    transport = SupervisorTransport(None, None, f"unix://{config.supervisor_socket}")
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)


def is_running(config: Config) -> bool:
    try:
        _rpc(config).supervisor.getState()
        return True
    except (OSError, xmlrpc.client.Error):
        return False


def processes(config: Config) -> list[dict]:
    """supervisord's view of every program: ``name``, ``group``, ``statename``, ``pid``, ``description``."""
    try:
        return _rpc(config).supervisor.getAllProcessInfo()
    except (OSError, xmlrpc.client.Error) as exc:
        raise StackError(f"supervisord is not running for {config.home} ({exc.__class__.__name__}); start it with `monitor up`") from None


def up(config: Config, timeout: float = 20.0) -> None:
    """Start supervisord (which starts every program); a no-op when it already runs."""
    if is_running(config):
        return
    config.log_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(config.db_path)  # apply migrations once, before the programs race to do it
    try:
        store.forget_ended_workers()  # the runs of the last start are history: status shows this one
    finally:
        store.close()
    if config.local_broker:
        broker.prepare(config)
    result = subprocess.run([_tool("supervisord"), "-c", str(CONF)], env=stack_env(config),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise StackError(f"supervisord failed to start: {(result.stderr or result.stdout).strip()[:300]}")
    deadline = time.monotonic() + timeout
    while not is_running(config):
        if time.monotonic() > deadline:
            raise StackError(f"supervisord did not answer within {timeout:g}s; see {config.log_dir}/supervisord.log")
        time.sleep(0.2)


def wait_started(config: Config, timeout: float = 60.0) -> list[dict]:
    """Wait until no program is STARTING any more (the local broker takes a few seconds);
    return supervisord's final view."""
    deadline = time.monotonic() + timeout
    while True:
        infos = processes(config)
        if all(info["statename"] != "STARTING" for info in infos) or time.monotonic() > deadline:
            return infos
        time.sleep(0.5)


def wait_ready(config: Config, since: float, timeout: float = 60.0) -> list[str]:
    """Wait until the pipeline is connected: its queues declared, the processor consuming
    ``task_queue``, the master ``control``, every worker ``job_queue`` and each worker's
    heartbeat since ``since`` recorded by the master. Return what is still not ready when
    ``timeout`` runs out (nothing: ready)."""
    deadline = time.monotonic() + timeout
    while True:
        missing = _not_connected(config) or _not_beating(config, since)
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.3)


def _not_beating(config: Config, since: float) -> list[str]:
    store = open_store(config.db_path)
    try:
        beating = sum(w.state == "alive" and w.last_heartbeat >= since for w in store.list_workers())
    finally:
        store.close()
    return [] if beating >= config.workers else [f"worker heartbeats ({beating} of {config.workers})"]


def _not_connected(config: Config) -> list[str]:
    try:
        connection = amqp.connect(config, get_logger("cli"), attempts=1)
    except (amqp.BrokerUnavailable, *amqp.RECOVERABLE):
        return ["the broker (not accepting connections yet)"]
    wanted = ((amqp.TASK_QUEUE, 1, "the processor"), (amqp.CONTROL_QUEUE, 1, "the master"),
              (amqp.JOB_QUEUE, config.workers, "workers"))
    missing = []
    try:
        for queue, count, who in wanted:
            try:  # a passive declare counts a queue's consumers and needs no permission
                consumers = connection.channel().queue_declare(queue, passive=True).method.consumer_count
            except pika.exceptions.ChannelClosedByBroker:
                consumers = 0  # not declared yet
            if consumers < count:
                missing.append(f"{who} ({consumers} of {count} consuming {queue})")
    finally:
        connection.close()
    return missing


def down(config: Config, timeout: float = 120.0) -> bool:
    """Stop every program and supervisord; return False when nothing was running."""
    if not is_running(config):
        return False
    pidfile = config.home / "supervisord.pid"
    pid = int(pidfile.read_text()) if pidfile.exists() else None
    _rpc(config).supervisor.shutdown()
    deadline = time.monotonic() + timeout
    while pid is not None and _alive(pid):
        if time.monotonic() > deadline:
            raise StackError(f"supervisord (pid {pid}) did not stop within {timeout:g}s")
        time.sleep(0.2)
    if config.local_broker:
        broker.stop_epmd(config)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def ctl(config: Config, args: list[str]) -> int:
    """Run supervisorctl against this stack's socket (whatever MONITOR_HOME is) and return
    its exit code; 1 with one line when the stack is not running (supervisorctl would
    print a paragraph and exit 4)."""
    if not is_running(config):
        print(f"monitor: the stack is not running (home {config.home}): `monitor up` starts it", file=sys.stderr)
        return 1
    command = [_tool("supervisorctl"), "-c", str(CONF), "-s", f"unix://{config.supervisor_socket}", *args]
    return subprocess.run(command, env=stack_env(config)).returncode

"""The private RabbitMQ node a stack runs when no ``AMQP_URL`` is given.

Everything the node needs comes from environment variables derived from the
configuration: data and logs under ``$MONITOR_HOME/rabbitmq``, a node name and ports derived
from ``MONITOR_HOME`` (so two stacks never clash), loopback only, its own epmd port and
Erlang cookie. ``python -m monitor.broker`` runs the node in the foreground (supervisord's
``rabbitmq`` program, and the test fixtures); :func:`ctl` runs ``rabbitmqctl`` against it.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from monitor import config as configuration
from monitor.config import Config
from monitor.homekey import write_private

BROKER_USER = "monitor"
RABBITMQ_BIN = Path(os.environ.get("MONITOR_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))


class BrokerError(RuntimeError):
    """The local node is missing, misconfigured or not answering."""


def epmd_port(config: Config) -> int:
    return config.local_amqp_port + 5000


def dist_port(config: Config) -> int:
    return config.local_amqp_port + 10000


def node_name(config: Config) -> str:
    digest = hashlib.sha256(str(config.home.resolve()).encode()).hexdigest()[:8]
    return f"monitor-{digest}@localhost"


def node_env(config: Config) -> dict[str, str]:
    """The environment that defines the local node, for the server and for rabbitmqctl alike."""
    base = config.rabbitmq_dir
    env = dict(os.environ)
    env.update({
        "HOME": str(base),  # the Erlang cookie lives in $HOME/.erlang.cookie
        "RABBITMQ_NODENAME": node_name(config),
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(config.local_amqp_port),
        "RABBITMQ_DIST_PORT": str(dist_port(config)),
        "ERL_EPMD_PORT": str(epmd_port(config)),
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_LOGS": "-",
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
        "RABBITMQ_CONF_ENV_FILE": "/dev/null",
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_ENABLED_PLUGINS": "",
        # Erlang distribution (used by rabbitmqctl) listens on loopback only.
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        "RABBITMQ_CTL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    })
    return env


def _require_rabbitmq() -> None:
    if not (RABBITMQ_BIN / "rabbitmq-server").exists():
        raise BrokerError(f"RabbitMQ is not installed ({RABBITMQ_BIN}/rabbitmq-server missing): "
                          "run `make install` or `apt-get install rabbitmq-server`, or set AMQP_URL")


def prepare(config: Config) -> None:
    """Create the node's directories and files (idempotent).

    A new node gets a user of its own with a generated password (in
    ``rabbitmq/credentials``, mode 0600, read by :attr:`Config.broker_url`) instead of
    RabbitMQ's ``guest``, whose well-known password any local user could use. A node
    created before keeps its configuration (and ``guest``).
    """
    base = config.rabbitmq_dir
    for sub in ("mnesia", "log"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    conf = base / "rabbitmq.conf"
    if not conf.exists():
        password = secrets.token_urlsafe(24)
        write_private(config.broker_credentials_path, f"{BROKER_USER}:{password}\n")
        write_private(conf, "# Private node of homepage-monitor; managed by monitor/broker.py\n"
                       f"default_user = {BROKER_USER}\n"
                       f"default_pass = {password}\n"
                       "loopback_users.guest = true\n"
                       "disk_free_limit.absolute = 200MB\n")
    plugins = base / "enabled_plugins"
    if not plugins.exists():
        plugins.write_text("[].\n")


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_for_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not _port_open(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def ensure_epmd(config: Config, wait_for_supervised: float = 5.0) -> None:
    """Wait for this stack's epmd (a supervised program), else start one in the background."""
    port = epmd_port(config)
    if _wait_for_port(port, wait_for_supervised):
        return
    subprocess.run(["epmd", "-address", "127.0.0.1", "-port", str(port), "-daemon"], check=False)
    if not _wait_for_port(port, 10.0):
        raise BrokerError(f"epmd did not start on port {port}")


def stop_epmd(config: Config) -> None:
    """Stop this stack's epmd (it outlives the node otherwise)."""
    if shutil.which("epmd"):
        subprocess.run(["epmd", "-port", str(epmd_port(config)), "-kill"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ctl(config: Config, *args: str, timeout: float = 60.0) -> str:
    """Run ``rabbitmqctl`` against the local node and return its output."""
    _require_rabbitmq()
    result = subprocess.run([str(RABBITMQ_BIN / "rabbitmqctl"), "-q", "-n", node_name(config), *args],
                            env=node_env(config), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()
        raise BrokerError(f"rabbitmqctl {args[0]} failed: " + (output.splitlines()[0][:200] if output else f"exit code {result.returncode}"))
    return result.stdout


def queue_depths(config: Config) -> dict[str, tuple[int, int]]:
    """``{queue: (ready, unacked)}`` of the local node."""
    if not _port_open(config.local_amqp_port):
        raise BrokerError(f"the local broker is not accepting connections on 127.0.0.1:{config.local_amqp_port} "
                          "(still starting, or stopped)")
    out = ctl(config, "list_queues", "--no-table-headers", "name", "messages_ready", "messages_unacknowledged", timeout=30)
    depths = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            depths[parts[0]] = (int(parts[1]), int(parts[2]))
    return depths


def main() -> None:
    """Run the local node in the foreground (replaces this process)."""
    config = configuration.load()
    _require_rabbitmq()
    prepare(config)
    ensure_epmd(config)
    env = node_env(config)
    server = str(RABBITMQ_BIN / "rabbitmq-server")
    sys.stdout.flush()
    os.execve(server, [server], env)


if __name__ == "__main__":
    try:
        main()
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)

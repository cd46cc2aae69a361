"""Helpers the benchmark scripts share: the monitor CLI, a whole stack, bounded waits, peak memory."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from monitor.store import open_store

REPO = Path(__file__).resolve().parents[1]


def monitor(env: dict, *args: str) -> str:
    """Run ``monitor ARGS`` for the stack ``env`` describes; stop the benchmark if it fails."""
    result = subprocess.run([sys.executable, "-m", "monitor.cli", *args], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"monitor {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05) -> float:
    """Poll ``predicate`` until true; return the seconds it took (stop the benchmark after ``timeout``)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"gave up after {timeout:g}s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - start


def memory_mb(pid: int) -> dict[str, int]:
    """``VmRSS``, ``VmHWM`` (peak), ``RssAnon`` (heap) and ``RssFile`` (mapped files) of a process, in MB."""
    fields = ("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:")
    return {line.split(":")[0]: int(line.split()[1]) // 1024
            for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(fields)}


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def peak_kb(pid: int) -> int:
    """VmHWM of a process plus its descendants (the RabbitMQ program is a script running Erlang)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    own = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return own + sum(peak_kb(child) for child in _children(pid))


def peak_rss(home: Path) -> list[tuple[str, float]]:
    """(program, peak RSS in MB of its process tree) for every program supervisord runs for this stack."""
    from monitor import config as configuration, stack
    return [(info["name"], peak_kb(info["pid"]) / 1024)
            for info in stack.processes(configuration.load({"MONITOR_HOME": str(home)})) if info["pid"]]


class Stack:
    """This project's stack (``monitor up``) on a fresh home with ``settings`` in its
    monitor.toml, watching ``urls`` at ``interval``."""

    def __init__(self, urls: list[str], workers: int, settings: dict[str, float | int], interval: str = "1h") -> None:
        self.home = Path(tempfile.mkdtemp(prefix="monitor-bench-"))
        (self.home / "monitor.toml").write_text("".join(f"{key} = {value!r}\n" for key, value in settings.items()))
        self.env = dict(os.environ, MONITOR_HOME=str(self.home), MONITOR_ALLOW_PRIVATE="1",
                        MONITOR_WORKERS=str(workers), MONITOR_CONFIG=str(self.home / "monitor.toml"))
        self.env.pop("AMQP_URL", None)
        self.pages = len(urls)
        (self.home / "watches.txt").write_text("".join(f"{url},{interval}\n" for url in urls))
        monitor(self.env, "up")
        self.store = open_store(self.home / "monitor.sqlite3")
        monitor(self.env, "watch", "import", str(self.home / "watches.txt"))
        self.last_alert = 0

    def round(self, timeout: float = 900) -> tuple[float, list[str]]:
        """Check every watch once now; return the seconds it took and the URLs alerted."""
        started_at = time.time()
        start = time.monotonic()
        monitor(self.env, "watch", "recheck", "--all")
        wait_until(lambda: self.store.conn.execute("SELECT COUNT(*) FROM watches WHERE last_check >= ?",
                                                   (started_at,)).fetchone()[0] >= self.pages, timeout, "every check",
                   interval=0.01)
        seconds = time.monotonic() - start
        rows = self.store.conn.execute("SELECT rowid, url FROM alerts WHERE rowid > ? ORDER BY rowid",
                                       (self.last_alert,)).fetchall()
        self.last_alert = rows[-1][0] if rows else self.last_alert
        return seconds, [url for _, url in rows]

    def status(self) -> str:
        return monitor(self.env, "status")

    def close(self) -> None:
        self.store.close()
        monitor(self.env, "down")

"""Helpers the benchmark scripts share: the monitor CLI, bounded waits, peak memory."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

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

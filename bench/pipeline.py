"""End-to-end benchmark: N local pages through a real stack (supervisord, local RabbitMQ node).

Prints the baseline throughput (pages/s), then publishes one new link on every page,
asks for an immediate recheck of all watches and prints the second round's throughput
and the new-link latency (publish on the origin -> alert recorded). Figures only.

    .venv/bin/python bench/pipeline.py --pages 1000 --workers 2
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from monitor.demo import LocalSite  # noqa: E402
from monitor.store import open_store  # noqa: E402


def monitor(env: dict, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "monitor.cli", *args], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"monitor {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def wait_until(predicate, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"gave up after {timeout:g}s waiting for {what}")
        time.sleep(0.2)
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


def _peak_kb(pid: int) -> int:
    """VmHWM of a process plus its descendants (the RabbitMQ program is a script running Erlang)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    own = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return own + sum(_peak_kb(child) for child in _children(pid))


def peak_rss(home: Path) -> list[tuple[str, float]]:
    """(program, peak RSS in MB of its process tree) for every program supervisord runs for this stack."""
    from monitor import config as configuration, stack
    return [(info["name"], _peak_kb(info["pid"]) / 1024)
            for info in stack.processes(configuration.load({"MONITOR_HOME": str(home)})) if info["pid"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--links", type=int, default=40, help="links per page at the baseline")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="monitor-bench-"))
    env = dict(os.environ, MONITOR_HOME=str(home), MONITOR_ALLOW_PRIVATE="1", MONITOR_WORKERS=str(args.workers),
               MONITOR_CONFIG=str(home / "none.toml"))
    env.pop("AMQP_URL", None)
    # The pages share one loopback host but stand for as many sites: no per-host spacing.
    (home / "none.toml").write_text("politeness_delay = 0.0\n")
    site = LocalSite().start()
    urls = [site.add_page(f"/p{i}/", [(f"/p{i}/story-{j}", f"Story {j} of page {i}") for j in range(args.links)])
            for i in range(args.pages)]
    (home / "watches.txt").write_text("\n".join(f"{url},1h" for url in urls))
    try:
        monitor(env, "up")
        store = open_store(home / "monitor.sqlite3")
        print(monitor(env, "watch", "import", str(home / "watches.txt")).strip())
        checked = lambda n: store.conn.execute("SELECT COUNT(*) FROM watches WHERE last_status = 'ok'").fetchone()[0] >= n  # noqa: E731
        start = time.monotonic()
        # The first checks are spread over a minute by design; recheck --all asks for them now
        # (retried until the freshly started broker accepts connections).
        wait_until(lambda: subprocess.run([sys.executable, "-m", "monitor.cli", "watch", "recheck", "--all"], env=env,
                                          cwd=REPO, capture_output=True).returncode == 0, 60, "the broker")
        broker_wait = time.monotonic() - start
        wait_until(lambda: checked(args.pages), args.timeout, "the baselines")
        total = time.monotonic() - start - broker_wait
        print(f"baseline (after {broker_wait:.1f}s of broker start): {args.pages} pages x {args.links} links in {total:.1f}s = {args.pages / total:.1f} pages/s, "
              f"{args.pages * args.links / total:.0f} links/s ({args.workers} workers)")

        published = {}
        for i in range(args.pages):
            site.publish(f"/p{i}/", f"/p{i}/fresh", f"Fresh story on page {i}")
            published[site.url(f"/p{i}/fresh")] = time.time()
        round_start = time.monotonic()
        monitor(env, "watch", "recheck", "--all")
        alerts = lambda: store.conn.execute("SELECT url, first_seen FROM alerts").fetchall()  # noqa: E731
        wait_until(lambda: len(alerts()) >= args.pages, args.timeout, "one alert per page")
        round_time = time.monotonic() - round_start
        latencies = sorted(first_seen - published[url] for url, first_seen in alerts())
        print(f"recheck round: {args.pages} pages in {round_time:.1f}s = {args.pages / round_time:.1f} pages/s")
        print(f"new-link latency (origin publish -> alert recorded), {len(latencies)} alerts: "
              f"p50 {statistics.median(latencies):.2f}s, p95 {latencies[int(len(latencies) * 0.95) - 1]:.2f}s, "
              f"max {latencies[-1]:.2f}s")
        duplicates = len(alerts()) - len({url for url, _ in alerts()})
        print(f"alerts: {len(alerts())}, duplicates: {duplicates}, origin requests: {site.requests}")
        print("peak RSS per process: " + ", ".join(f"{name} {mb:.0f} MB" for name, mb in peak_rss(home)))
        store.close()
    finally:
        monitor(env, "down")
        site.stop()


if __name__ == "__main__":
    main()

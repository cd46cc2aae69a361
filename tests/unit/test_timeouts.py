"""Jobs that never come back (lost, or dead-lettered after killing workers): counted, shown, backed off."""
from __future__ import annotations

from pathlib import Path

from monitor.store import MAX_BACKOFF, open_store


def test_a_watch_whose_job_never_returns_fails_visibly_and_backs_off(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db.sqlite3")
    watch = store.add_watch("https://news.example/", 300)
    now = 1_000_000.0
    for failures, backoff in ((1, 60), (2, 120), (3, 240)):
        store.mark_in_flight([watch.id], now)
        assert store.time_out_jobs(now + 59, job_timeout=60) == [], "not before job_timeout"
        assert store.time_out_jobs(now + 61, job_timeout=60) == [(watch.id, failures)]
        watch_now = store.get_watch(watch.id)
        assert watch_now.in_flight_since is None and watch_now.consecutive_failures == failures
        assert watch_now.last_status.startswith(f"error: no result within 60s, {failures} time(s) in a row")
        assert store.due_watches(now + 61 + backoff - 1, 10) == [], "backed off"
        assert [w.id for w in store.due_watches(now + 61 + backoff, 10)] == [watch.id]
        now += 61 + backoff
    store.mark_in_flight([watch.id], now)
    with store.transaction() as conn:
        conn.execute("UPDATE watches SET consecutive_failures = 40")
    store.time_out_jobs(now + 61, job_timeout=60)
    assert store.get_watch(watch.id).next_due == now + 61 + MAX_BACKOFF, "never longer than a day"
    store.close()

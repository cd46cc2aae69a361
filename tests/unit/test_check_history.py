"""A watch's recent checks: the last HISTORY of them, once each, on a real SQLite file."""
from __future__ import annotations

from pathlib import Path

from monitor.store import HISTORY, CheckResult, open_store


def _check(watch_id: int, at: float, outcome: str = "ok", found: int | None = 12) -> CheckResult:
    status = "ok" if outcome == "ok" else f"{outcome}: HTTP 404"
    return CheckResult(watch_id, at, status, 200, 40, [], {}, outcome=outcome, found=found)


def test_the_last_checks_are_kept_newest_first_and_no_more(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db.sqlite3")
    watch = store.add_watch("https://news.test/", 300)
    for n in range(HISTORY + 10):
        store.record_results([_check(watch.id, 1000.0 + n, "error" if n % 7 == 0 else "ok")])
    history = store.recent_checks(watch.id)
    assert len(history) == HISTORY
    assert [line.checked_at for line in history] == [1000.0 + n for n in range(HISTORY + 9, 9, -1)]
    assert history[0].found == 12 and {line.outcome for line in history} == {"ok", "error"}
    assert [outcome for outcome, _ in store.check_outcomes([watch.id])[watch.id]][-1] == history[0].outcome
    store.close()


def test_a_replayed_result_adds_no_second_line(tmp_path: Path) -> None:
    """The processor applies an outbox record again after a crash: same checked_at."""
    store = open_store(tmp_path / "db.sqlite3")
    watch = store.add_watch("https://news.test/", 300)
    store.record_results([_check(watch.id, 1000.0)])
    store.record_results([_check(watch.id, 1000.0)])
    store.record_results([_check(watch.id, 2000.0, "error", None)])
    assert [(line.outcome, line.found) for line in store.recent_checks(watch.id)] == [("error", None), ("ok", 12)]
    store.close()

"""Tables that would otherwise grow for as long as the service runs."""
from __future__ import annotations

from pathlib import Path

from monitor.messages import DIRECT, Heartbeat
from monitor.store import CheckResult, LinkRecord, open_store

DAY = 86400.0


def test_old_fleet_rows_are_pruned_and_current_ones_kept(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db.sqlite3")
    now = 100 * DAY
    store.record_heartbeat(Heartbeat("old", "h", 1, 1.0, state="stopped"), now - 8 * DAY)
    store.record_heartbeat(Heartbeat("recent", "h", 2, 1.0, state="stopped"), now - 1 * DAY)
    store.record_heartbeat(Heartbeat("quiet-but-alive", "h", 3, 1.0), now - 30 * DAY)
    store.disable_host("ended.example", now - 3 * DAY, DAY, DAY, "r", "direct", "w")
    store.disable_host("current.example", now, 60, 60, "r", "direct", "w")
    store.record_refusals("a.example", [DIRECT], now - 3600)
    store.record_refusals("b.example", [DIRECT], now - 60)
    assert store.prune(now, refusals_since=now - 600) == {"workers": 1, "host_cooldowns": 1, "refusals": 1,
                                                          "check_counts": 0, "deliveries": 0}
    assert {w.id for w in store.list_workers()} == {"recent", "quiet-but-alive"}
    assert store.cooldowns(now) == {"current.example": now + 60}
    assert store.refused_by_every_exit("b.example", now - 600), "the recent refusal is kept"
    store.close()


def test_a_host_cooldown_doubles_with_each_one_in_a_row_and_starts_over_after_a_quiet_day(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db.sqlite3")
    now = 100 * DAY
    lengths = []
    for _ in range(7):
        cooldown = store.disable_host("a.example", now, 300, 7200, "r", "direct", "w")
        lengths.append(cooldown.until - now)
        now = cooldown.until + 60  # refused again a minute after it ended
    assert lengths == [300, 600, 1200, 2400, 4800, 7200, 7200]
    later = store.disable_host("a.example", now + 2 * DAY, 300, 7200, "r", "direct", "w")
    assert (later.strikes, later.until - (now + 2 * DAY)) == (1, 300)
    assert store.enable_host("a.example", now + 2 * DAY) and store.cooldowns(now + 2 * DAY) == {}
    assert store.disable_host("a.example", now + 2 * DAY, 300, 7200, "r", "direct", "w").strikes == 1
    store.close()


def test_deliveries_delivered_a_week_ago_go_and_every_sink_still_counts_them(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db.sqlite3")
    now = 100 * DAY
    watch_id = store.add_watch("https://news.example/", 300).id
    for sink in ("hook", "mail"):
        store.add_sink(sink, "webhook", "https://h.example/", {}, None, None, 0.0)
    links = [f"https://news.example/{n}" for n in range(5)]
    store.record_results([CheckResult(watch_id, now - 9 * DAY, "ok", 200, 1, [LinkRecord(url, "T", url[-6:], now)
                                                                            for url in links],
                                      {url: f"a{n}" for n, url in enumerate(links)})])
    store.delivered("hook", ["a0", "a1", "a2"], now - 8 * DAY)  # a week ago and more
    store.delivered("hook", ["a3"], now - DAY)                  # this week
    store.delivered("mail", ["a0"], now - 8 * DAY)
    before = {sink.name: (sink.delivered, sink.pending) for sink in store.list_sinks()}
    assert before == {"hook": (4, 1), "mail": (1, 4)}

    assert store.prune(now, refusals_since=now)["deliveries"] == 4
    assert {sink.name: (sink.delivered, sink.pending) for sink in store.list_sinks()} == before
    assert store.conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0] == 10 - 4
    assert store.prune(now, refusals_since=now)["deliveries"] == 0, "counted once"
    assert {sink.name: sink.delivered for sink in store.list_sinks()} == {"hook": 4, "mail": 1}
    store.close()

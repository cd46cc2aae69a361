"""The dashboard's newest alerts, of every watch, one watch or one tag, common or rare."""
from __future__ import annotations

from monitor.store import COMMON_TAG, CheckResult, LinkRecord, Store


def _alert(store: Store, watch_id: int, n: int, at: float) -> None:
    url = f"https://site{watch_id}.example/{n}"
    store.record_results([CheckResult(watch_id, at, "ok", 200, 1, [LinkRecord(url, "T", f"c{n:05d}", at)],
                                      {url: f"{watch_id}-{n}"})])


def test_a_tags_newest_alerts_are_the_same_whether_the_tag_is_common_or_rare(store: Store) -> None:
    tags = ["big"] * 100 + ["rare"] + [None] * 99  # "big" on half the watches, "rare" on one in 200
    ids = [store.add_watch(f"https://site{n}.example/", 3600, tag=tag).id for n, tag in enumerate(tags)]
    assert 100 / 200 >= COMMON_TAG > 1 / 200
    for n in range(600):  # every third alert a "big" watch's, and a "rare" one now and then
        watch_id = ids[100] if n % 50 == 0 else ids[n % 200]
        _alert(store, watch_id, n, 1000.0 + n)

    def expected(tag: str, after: float = 0) -> list[str]:
        rows = store.conn.execute("SELECT a.alert_id FROM alerts a JOIN watches w ON w.id = a.watch_id "
                                  "WHERE w.tag = ? AND a.first_seen > ? ORDER BY a.first_seen DESC", (tag, after))
        return [row[0] for row in rows][:20]

    for tag in ("big", "rare"):
        assert [a["alert_id"] for a in store.recent_alerts(20, tag=tag)] == expected(tag), tag
        newest = store.recent_alerts(20, tag=tag)
        after = store.conn.execute("SELECT rowid FROM alerts WHERE alert_id = ?", (newest[5]["alert_id"],)).fetchone()[0]
        assert [a["alert_id"] for a in store.recent_alerts(20, tag=tag, after_rowid=after)] == \
            [a["alert_id"] for a in newest[:5]], f"{tag}: the live poll's rows, newest first"
    assert len(expected("rare")) == 12 and store.recent_alerts(5, tag="none-such") == []

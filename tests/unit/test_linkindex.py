"""The seen-link index and the processor's task handling, on real LevelDB and SQLite files.

No broker: tasks go straight to ``Processor.handle`` and the outbox is drained by hand,
the way the processor does at start after a crash.
"""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from controller.processor import HealthRule, LayoutRule, Processor
from monitor.codes import shorten
from monitor.linkindex import LinkIndex, Reappearance, alert_id
from monitor.messages import Alert, Task
from monitor.sinks import JsonLinesSink
from monitor.store import Store, Watch

HOME = "https://news.example/"
SMALL_PAGES = LayoutRule(baseline_min_links=1)  # the test pages have a link or two


class Crash(Exception):
    """Stands in for the process dying at a chosen point."""


class CrashingSink:
    """A sink that dies whenever it is handed alerts."""

    name = "crashing"

    def deliver(self, alerts: list[Alert]) -> None:
        if alerts:
            raise Crash("killed while delivering")

    def delivered(self, alert_ids: set[str]) -> set[str]:
        return set()


class RecordingSink:
    """A sink that keeps what it is given in memory."""

    name = "recording"

    def __init__(self) -> None:
        self.received: list[Alert] = []

    def deliver(self, alerts: list[Alert]) -> None:
        self.received.extend(alerts)

    def delivered(self, alert_ids: set[str]) -> set[str]:
        return {alert.alert_id for alert in self.received} & alert_ids


# --- fixtures and helpers ----------------------------------------------------------------------
@pytest.fixture
def open_index(tmp_path: Path) -> Iterator[Callable[..., LinkIndex]]:
    """Open LinkIndex instances under tmp_path (closed at the end of the test)."""
    opened: list[LinkIndex] = []

    def factory(name: str = "ldb", shorten: Callable[[str], str] = shorten) -> LinkIndex:
        index = LinkIndex(tmp_path / name, shorten=shorten)
        opened.append(index)
        return index

    yield factory
    for index in opened:
        if not index.db.closed:
            index.close()


@pytest.fixture
def index(open_index: Callable[..., LinkIndex]) -> LinkIndex:
    return open_index()


@pytest.fixture
def jsonl(tmp_path: Path) -> JsonLinesSink:
    return JsonLinesSink(tmp_path / "alerts.jsonl")


@pytest.fixture
def processor(store: Store, index: LinkIndex, jsonl: JsonLinesSink) -> Processor:
    return Processor(store, index, [jsonl], layout=SMALL_PAGES)


@pytest.fixture
def watch(store: Store) -> Watch:
    return store.add_watch(HOME, 300)


def page(*paths: str) -> list[dict[str, str]]:
    """Task context for links to ``paths`` on the watched site; the text is the path in capitals."""
    return [{"url": HOME + path, "text": path.upper()} for path in paths]


def ok_task(watch: Watch, *paths: str) -> Task:
    return Task(watch.url, watch.id, page(*paths))


def jsonl_alerts(sink: JsonLinesSink) -> list[dict]:
    if not sink.path.exists():
        return []
    return [json.loads(line) for line in sink.path.read_text(encoding="utf-8").splitlines()]


def stored_urls(store: Store, watch: Watch) -> set[str]:
    return {link.url for link in store.links(watch.id)}


# --- alert ids -----------------------------------------------------------------------------------
def test_alert_id_format() -> None:
    assert alert_id(12, "aB3xYz", 0) == "12-aB3xYz"
    assert alert_id(12, "aB3xYz", 2) == "12-aB3xYz-2"


# --- baseline and new links ------------------------------------------------------------------------
def test_first_task_is_a_baseline(processor: Processor, store: Store, index: LinkIndex, watch: Watch,
                                  jsonl: JsonLinesSink) -> None:
    assert processor.handle(ok_task(watch, "a", "b")) == 0
    assert stored_urls(store, watch) == {HOME + "a", HOME + "b"}
    assert {link.code for link in store.links(watch.id)} == {shorten(HOME + "a"), shorten(HOME + "b")}
    assert jsonl_alerts(jsonl) == []
    assert store.alerts() == []
    assert index.mark(watch.id).baselined
    assert store.get_watch(watch.id).last_status == "ok"


def test_second_task_alerts_each_new_link(processor: Processor, store: Store, watch: Watch,
                                          jsonl: JsonLinesSink) -> None:
    processor.handle(ok_task(watch, "a", "b"))
    assert processor.handle(ok_task(watch, "a", "b", "c", "d")) == 2
    alerts = jsonl_alerts(jsonl)
    assert [(a["url"], a["text"]) for a in alerts] == [(HOME + "c", "C"), (HOME + "d", "D")]
    assert [a["alert_id"] for a in alerts] == [f"{watch.id}-{shorten(HOME + 'c')}", f"{watch.id}-{shorten(HOME + 'd')}"]
    assert all(a["watch_id"] == watch.id and a["baseUrl"] == HOME for a in alerts)
    assert [alert for _, alert in store.alerts()] == alerts
    assert len(store.links(watch.id)) == 4


def test_replaying_a_task_raises_nothing_new(processor: Processor, store: Store, watch: Watch,
                                             jsonl: JsonLinesSink) -> None:
    processor.handle(ok_task(watch, "a"))
    task = ok_task(watch, "a", "b", "c")
    assert processor.handle(task) == 2
    assert processor.handle(task) == 0
    assert len(jsonl_alerts(jsonl)) == 2
    assert len(store.alerts()) == 2


def test_links_are_compared_normalised(processor: Processor, watch: Watch, jsonl: JsonLinesSink) -> None:
    processor.handle(ok_task(watch, "a"))
    respelled = [{"url": "HTTPS://News.Example:443/a#comments", "text": "A again"}]
    assert processor.handle(Task(watch.url, watch.id, respelled)) == 0
    assert jsonl_alerts(jsonl) == []


def test_unusable_link_urls_are_skipped(processor: Processor, store: Store, watch: Watch) -> None:
    context = page("a") + [{"url": "http://news.example:99999/bad-port", "text": "bad"}]
    processor.handle(Task(watch.url, watch.id, context))
    assert stored_urls(store, watch) == {HOME + "a"}


def test_index_survives_a_restart(store: Store, open_index: Callable[..., LinkIndex], watch: Watch,
                                  jsonl: JsonLinesSink) -> None:
    first = open_index()
    Processor(store, first, [jsonl], layout=SMALL_PAGES).handle(ok_task(watch, "a", "b"))
    first.close()
    reopened = open_index()
    assert reopened.mark(watch.id).baselined
    assert Processor(store, reopened, [jsonl], layout=SMALL_PAGES).handle(ok_task(watch, "a", "b", "c")) == 1


def test_watches_have_separate_indexes(processor: Processor, store: Store, watch: Watch,
                                       jsonl: JsonLinesSink) -> None:
    other = store.add_watch("https://other.example/", 300)
    processor.handle(ok_task(watch, "a"))
    processor.handle(Task(other.url, other.id, page("a")))    # the same URL is a baseline for the other watch
    assert processor.handle(Task(other.url, other.id, page("a", "b"))) == 1
    assert [a["watch_id"] for a in jsonl_alerts(jsonl)] == [other.id]


# --- code collisions -------------------------------------------------------------------------------
def test_collision_is_still_a_new_link(store: Store, open_index: Callable[..., LinkIndex], watch: Watch,
                                       jsonl: JsonLinesSink) -> None:
    index = open_index("colliding", shorten=lambda url: "AAAAAA")
    processor = Processor(store, index, [jsonl], layout=SMALL_PAGES)
    processor.handle(ok_task(watch, "a"))
    assert processor.handle(ok_task(watch, "a", "b")) == 1
    assert [(a["alert_id"], a["url"], a["text"]) for a in jsonl_alerts(jsonl)] == \
        [(f"{watch.id}-AAAAAA-1", HOME + "b", "B")]
    assert stored_urls(store, watch) == {HOME + "a", HOME + "b"}
    assert {link.code for link in store.links(watch.id)} == {"AAAAAA"}


def test_collisions_within_one_task_get_distinct_ids(store: Store, open_index: Callable[..., LinkIndex],
                                                     watch: Watch, jsonl: JsonLinesSink) -> None:
    processor = Processor(store, open_index("colliding", shorten=lambda url: "AAAAAA"), [jsonl], layout=SMALL_PAGES)
    processor.handle(ok_task(watch, "a"))
    assert processor.handle(ok_task(watch, "b", "c", "a")) == 2
    assert processor.handle(ok_task(watch, "c", "b", "a")) == 0
    assert [a["alert_id"] for a in jsonl_alerts(jsonl)] == [f"{watch.id}-AAAAAA-1", f"{watch.id}-AAAAAA-2"]


# --- crash recovery through the outbox --------------------------------------------------------------
def test_crash_before_applying_leaves_an_outbox_record(monkeypatch: pytest.MonkeyPatch, store: Store,
                                                       index: LinkIndex, processor: Processor, watch: Watch,
                                                       jsonl: JsonLinesSink) -> None:
    processor.handle(ok_task(watch, "a"))

    def crash(*args, **kwargs):
        raise Crash("killed after the LevelDB batch")

    monkeypatch.setattr(processor, "apply", crash)
    task = ok_task(watch, "a", "b", "c")
    with pytest.raises(Crash):
        processor.handle(task)
    assert len(list(index.outbox())) == 1
    assert stored_urls(store, watch) == {HOME + "a"}
    assert jsonl_alerts(jsonl) == []

    restarted = Processor(store, index, [jsonl], layout=SMALL_PAGES)
    assert restarted.drain_outbox() == 1
    assert list(index.outbox()) == []
    assert [a["url"] for a in jsonl_alerts(jsonl)] == [HOME + "b", HOME + "c"]
    assert stored_urls(store, watch) == {HOME + "a", HOME + "b", HOME + "c"}
    assert restarted.handle(task) == 0                      # the unacked task is redelivered
    assert len(jsonl_alerts(jsonl)) == 2


def test_crash_after_the_first_sink_delivers_each_alert_once(store: Store, index: LinkIndex, watch: Watch,
                                                             jsonl: JsonLinesSink) -> None:
    Processor(store, index, [jsonl], layout=SMALL_PAGES).handle(ok_task(watch, "a"))
    with pytest.raises(Crash):
        Processor(store, index, [jsonl, CrashingSink()], layout=SMALL_PAGES).handle(ok_task(watch, "a", "b", "c"))
    delivered_before = jsonl_alerts(jsonl)
    assert [a["url"] for a in delivered_before] == [HOME + "b", HOME + "c"]
    assert len(list(index.outbox())) == 1

    second = RecordingSink()
    assert Processor(store, index, [jsonl, second], layout=SMALL_PAGES).drain_outbox() == 1
    assert jsonl_alerts(jsonl) == delivered_before           # no duplicate in the JSONL file
    assert [alert.url for alert in second.received] == [HOME + "b", HOME + "c"]
    assert len(store.alerts()) == 2
    assert list(index.outbox()) == []


def test_draining_an_empty_outbox_does_nothing(processor: Processor, jsonl: JsonLinesSink) -> None:
    assert processor.drain_outbox() == 0
    assert jsonl_alerts(jsonl) == []


def test_outbox_record_applied_twice_changes_nothing(store: Store, index: LinkIndex, watch: Watch,
                                                     jsonl: JsonLinesSink) -> None:
    """A record committed by hand and applied twice (crash before ``done``) stays exactly-once."""
    processor = Processor(store, index, [jsonl], layout=SMALL_PAGES)
    processor.handle(ok_task(watch, "a"))
    url = HOME + "z"
    record = {"watch_id": watch.id, "base_url": HOME, "checked_at": 1700000000.0, "status": "ok",
              "http_status": 200, "elapsed_ms": 5,
              "links": [{"url": url, "text": "Z", "code": shorten(url), "alert_id": alert_id(watch.id, shorten(url), 0)}]}
    key = index.commit({}, record)
    processor.apply(key, record, recovering=False)
    index.commit({}, record)                         # as if the process died before done()
    assert Processor(store, index, [jsonl], layout=SMALL_PAGES).drain_outbox() == 1
    assert [a["alert_id"] for a in jsonl_alerts(jsonl)] == [f"{watch.id}-{shorten(url)}"]
    assert len(store.alerts()) == 1


# --- removed watches and errors ----------------------------------------------------------------------
def test_task_for_a_removed_watch_is_dropped(processor: Processor, store: Store, index: LinkIndex,
                                             watch: Watch, jsonl: JsonLinesSink) -> None:
    processor.handle(ok_task(watch, "a"))
    store.remove_watch(watch.id)
    assert processor.handle(ok_task(watch, "a", "b")) == 0
    assert list(index.outbox()) == []
    assert jsonl_alerts(jsonl) == []
    assert store.links(watch.id) == []


def test_error_task_records_status_and_failures(processor: Processor, store: Store, index: LinkIndex,
                                                watch: Watch) -> None:
    processor.handle(Task(watch.url, watch.id, [], status="error", error="timeout after 45s"))
    processor.handle(Task(watch.url, watch.id, [], status="error"))
    after_errors = store.get_watch(watch.id)
    assert after_errors.last_status == "error: no reason given"
    assert after_errors.consecutive_failures == 2
    assert after_errors.last_check is not None
    assert not index.mark(watch.id).baselined

    processor.handle(Task(watch.url, watch.id, [], status="error", error="HTTP 503"))
    assert store.get_watch(watch.id).last_status == "error: HTTP 503"
    processor.handle(ok_task(watch, "a"))
    recovered = store.get_watch(watch.id)
    assert (recovered.last_status, recovered.consecutive_failures) == ("ok", 0)


def test_a_skipped_check_is_recorded_but_is_not_a_failure(processor: Processor, store: Store, watch: Watch) -> None:
    processor.handle(Task(watch.url, watch.id, [], status="skipped", error="host disabled until 2026-01-01T00:00:00Z"))
    skipped = store.get_watch(watch.id)
    assert skipped.last_status == "skipped: host disabled until 2026-01-01T00:00:00Z"
    assert skipped.consecutive_failures == 0


def test_first_ok_task_after_errors_is_the_baseline(processor: Processor, watch: Watch, jsonl: JsonLinesSink) -> None:
    processor.handle(Task(watch.url, watch.id, page("x"), status="error", error="timeout"))
    assert processor.handle(ok_task(watch, "a", "b")) == 0
    assert processor.handle(ok_task(watch, "a", "b", "c")) == 1
    assert [a["url"] for a in jsonl_alerts(jsonl)] == [HOME + "c"]


def test_error_task_does_not_touch_known_links(processor: Processor, store: Store, watch: Watch) -> None:
    processor.handle(ok_task(watch, "a"))
    processor.handle(Task(watch.url, watch.id, page("b"), status="error", error="HTTP 500"))
    assert stored_urls(store, watch) == {HOME + "a"}


# --- groups of tasks ----------------------------------------------------------------------------------
def test_a_group_commits_once_and_a_task_delivered_twice_in_it_alerts_once(
        processor: Processor, store: Store, index: LinkIndex, watch: Watch, jsonl: JsonLinesSink) -> None:
    other = store.add_watch("https://other.example/", 300)
    processor.handle(ok_task(watch, "a"))
    processor.handle(Task(other.url, other.id, page("a")))
    twice = ok_task(watch, "a", "b")
    assert processor.handle_group([twice, Task(other.url, other.id, page("a", "c")), twice]) == 2
    assert sorted(a["url"] for a in jsonl_alerts(jsonl)) == [HOME + "b", HOME + "c"]
    assert list(index.outbox()) == []


def test_a_new_watch_checked_twice_in_one_group_has_one_baseline(processor: Processor, watch: Watch,
                                                                  jsonl: JsonLinesSink) -> None:
    assert processor.handle_group([ok_task(watch, "a"), ok_task(watch, "a", "b")]) == 1
    assert [a["url"] for a in jsonl_alerts(jsonl)] == [HOME + "b"]


def test_not_modified_touches_no_link_and_keeps_the_validators_fresh(processor: Processor, store: Store,
                                                                     watch: Watch) -> None:
    processor.handle(Task(watch.url, watch.id, page("a"), etag='"v1"', last_modified="Mon", content_hash="h1"))
    assert (store.get_watch(watch.id).etag, store.get_watch(watch.id).content_hash) == ('"v1"', "h1")
    processor.handle(Task(watch.url, watch.id, [], status="error", error="HTTP 500"))
    assert store.get_watch(watch.id).etag == '"v1"', "a failed check keeps the validators"
    assert processor.handle(Task(watch.url, watch.id, [], status="not_modified", not_modified_by="hash",
                                 etag='"v2"', content_hash="h1")) == 0
    checked = store.get_watch(watch.id)
    assert (checked.last_status, checked.consecutive_failures, checked.etag, checked.last_modified) == \
        ("ok", 0, '"v2"', None)
    assert stored_urls(store, watch) == {HOME + "a"}
    processor.handle(ok_task(watch, "a"))
    assert store.get_watch(watch.id).content_hash is None, "a page without validators clears them"


def test_each_check_is_counted_by_outcome(processor: Processor, store: Store, watch: Watch) -> None:
    processor.handle_group([
        ok_task(watch, "a"),
        Task(watch.url, watch.id, [], status="not_modified", not_modified_by="http"),
        Task(watch.url, watch.id, [], status="not_modified", not_modified_by="hash"),
        Task(watch.url, watch.id, [], status="not_modified", not_modified_by="hash"),
        Task(watch.url, watch.id, [], status="error", error="timeout"),
    ])
    counts = dict(store.conn.execute("SELECT outcome, SUM(count) FROM check_counts GROUP BY outcome").fetchall())
    assert counts == {"ok": 1, "not_modified_http": 1, "not_modified_hash": 2, "error": 1}


class FakeChannel:
    """Records acks, rejects and sleeps the way a pika channel and its connection receive them."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.connection = self

    def basic_ack(self, tag: int, multiple: bool = False) -> None:
        self.calls.append(("ack", tag, multiple))

    def basic_reject(self, tag: int, requeue: bool = True) -> None:
        self.calls.append(("reject", tag, requeue))

    def sleep(self, seconds: float) -> None:
        self.calls.append(("sleep", seconds))


def test_a_group_is_acked_with_one_multiple_ack(processor: Processor, watch: Watch) -> None:
    channel = FakeChannel()
    processor.on_group(channel, [(5, ok_task(watch, "a")), (6, ok_task(watch, "a", "b"))])
    assert channel.calls == [("ack", 6, True)]


def test_a_task_that_always_fails_does_not_hold_back_its_group(monkeypatch: pytest.MonkeyPatch, processor: Processor,
                                                               store: Store, watch: Watch) -> None:
    other = store.add_watch("https://other.example/", 300)
    record = store.record_results

    def refuse_the_poison(results):
        if any(result.watch_id == watch.id for result in results):
            raise Crash("this task can never be stored")
        return record(results)

    monkeypatch.setattr(store, "record_results", refuse_the_poison)
    channel = FakeChannel()
    processor.on_group(channel, [(1, Task(other.url, other.id, page("a"))), (2, ok_task(watch, "a"))])
    assert channel.calls == [("ack", 1, False), ("reject", 2, False)], "the task at fault goes to dead_letter"
    assert store.get_watch(other.id).last_status == "ok"


def test_a_task_is_held_not_requeued_while_the_store_is_unavailable(monkeypatch: pytest.MonkeyPatch,
                                                                    processor: Processor, store: Store,
                                                                    watch: Watch) -> None:
    """A requeue would count towards the task's delivery limit (RabbitMQ 3) and dead-letter
    a healthy task; the processor waits for the store instead, backing off."""
    record = store.record_results
    failures = iter([sqlite3.OperationalError("database is locked")] * 3)

    def locked(results):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return record(results)

    monkeypatch.setattr(store, "record_results", locked)
    channel = FakeChannel()
    processor.on_group(channel, [(7, ok_task(watch, "a"))])
    assert channel.calls == [("sleep", 0.5), ("sleep", 1.0), ("ack", 7, False)]
    assert store.get_watch(watch.id).last_status == "ok"


def test_the_processor_commits_to_sqlite_durably(processor: Processor, store: Store) -> None:
    """Its outbox record is deleted (synced) right after the SQLite commit, so that commit
    must be on disk too (synchronous=FULL), not only at the next WAL checkpoint."""
    assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_a_stale_result_changes_nothing(processor: Processor, store: Store, watch: Watch, jsonl: JsonLinesSink) -> None:
    """A timed-out job's late task (or a replayed dead letter) fetched before the result the
    watch already has: it must not overwrite the status, nor alert, nor become the baseline."""
    fresh = Task(watch.url, watch.id, page("a"), fetched_at=2000.0)
    processor.handle(fresh)
    processor.handle(Task(watch.url, watch.id, page("a", "b"), fetched_at=2000.0 + 60))
    assert [a["url"] for a in jsonl_alerts(jsonl)] == [HOME + "b"]
    stale = Task(watch.url, watch.id, page("a", "b", "old"), fetched_at=1500.0)
    failed = Task(watch.url, watch.id, [], status="error", error="HTTP 500", fetched_at=1999.0)
    assert processor.handle_group([stale, failed]) == 0
    assert store.get_watch(watch.id).last_status == "ok"
    assert stored_urls(store, watch) == {HOME + "a", HOME + "b"} and len(jsonl_alerts(jsonl)) == 1


def test_an_outbox_record_replayed_after_its_watch_was_removed_alerts_nobody(
        monkeypatch: pytest.MonkeyPatch, store: Store, index: LinkIndex, processor: Processor, watch: Watch,
        jsonl: JsonLinesSink) -> None:
    processor.handle(ok_task(watch, "a"))

    def crash(*args, **kwargs):
        raise Crash("killed after the LevelDB batch")

    monkeypatch.setattr(processor, "apply", crash)
    with pytest.raises(Crash):
        processor.handle(ok_task(watch, "a", "b"))
    store.remove_watch(watch.id)
    second = RecordingSink()
    assert Processor(store, index, [jsonl, second], layout=SMALL_PAGES).drain_outbox() == 1
    assert jsonl_alerts(jsonl) == [] and second.received == []


def test_an_alert_names_the_watched_page_from_the_store_not_from_the_task(processor: Processor, watch: Watch,
                                                                          jsonl: JsonLinesSink) -> None:
    processor.handle(ok_task(watch, "a"))
    processor.handle(Task("https://attacker.example/", watch.id, page("a", "b")))
    assert [a["baseUrl"] for a in jsonl_alerts(jsonl)] == [watch.url]


def test_watch_list_counts_are_kept_as_results_are_recorded(processor: Processor, store: Store, index: LinkIndex,
                                                            watch: Watch) -> None:
    """`watch list` reads counters instead of counting every link row of every watch; they
    must agree with the rows, replays included."""
    processor.handle(ok_task(watch, "a", "b"))
    processor.handle(ok_task(watch, "a", "b", "c", "d"))
    processor.handle(ok_task(watch, "a", "b", "c", "d"))  # a redelivered task adds nothing
    [listed] = store.list_watches()
    assert (listed.links_known, listed.new_links) == (len(store.links(watch.id)), len(store.alerts())) == (4, 2)


def test_a_removed_watchs_index_entries_are_deleted(processor: Processor, store: Store, index: LinkIndex,
                                                   watch: Watch) -> None:
    """LevelDB is the processor's alone: `watch remove` leaves the id in the store, and the
    processor deletes the watch's entries at its next quiet moment."""
    other = store.add_watch("https://other.example/", 300)
    processor.handle(ok_task(watch, "a", "b"))
    processor.handle(Task(other.url, other.id, page("a")))
    store.remove_watch(watch.id)
    processor.forget_removed()
    keys = [key for key in index.db.iterator(include_value=False)]
    assert not [key for key in keys if key.startswith((b"L%d:" % watch.id, b"B%d" % watch.id))]
    assert [key for key in keys if key.startswith(b"L%d:" % other.id)] and index.mark(other.id).baselined
    assert store.removed_watches() == []


# --- comparable URLs: tracking parameters and parameter order -------------------------------------
def test_a_link_shared_with_tracking_parameters_or_reordered_is_the_same_link(processor, watch, jsonl) -> None:
    processor.handle(ok_task(watch, "story?id=7&page=2"))  # the baseline
    processor.handle(ok_task(watch, "story?page=2&id=7&utm_source=tw&fbclid=abc", "story?utm_medium=x&id=7&page=2"))
    assert jsonl_alerts(jsonl) == []
    processor.handle(ok_task(watch, "story?id=8&utm_campaign=spring"))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "story?id=8"], "alerted without the tracking"


def test_upgrading_to_comparable_urls_makes_no_known_link_new(store, open_index, tmp_path, watch) -> None:
    """An index written before comparable URLs holds links in their former (normalised) form."""
    before = open_index("upgraded")
    former = [(url, url.upper(), ()) for url in (HOME + "a?b=2&a=1", HOME + "news?utm_source=rss&id=3")]
    found, entries = before.new_links(watch.id, former)
    before.commit(entries, {"checks": []})
    before.db.put(b"B%d" % watch.id, b"1")
    before.close()

    jsonl = JsonLinesSink(tmp_path / "after.jsonl")
    processor = Processor(store, open_index("upgraded"), [jsonl], layout=SMALL_PAGES)
    processor.handle(ok_task(watch, "a?b=2&a=1", "news?utm_source=rss&id=3", "news?id=4"))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "news?id=4"]
    processor.handle(ok_task(watch, "a?a=1&b=2", "news?id=3"))
    assert len(jsonl_alerts(jsonl)) == 1, "the links are remembered in their new form too"


# --- a redesign is one alert ------------------------------------------------------------------------
def test_a_redesign_is_one_layout_alert_and_its_links_are_adopted_silently(processor, watch, jsonl, store) -> None:
    old = [f"old/{n}" for n in range(30)]
    processor.handle(ok_task(watch, *old))  # the baseline
    new = [f"2026/{n}" for n in range(40)]
    processor.handle(ok_task(watch, *new, *old[:10]))
    [alert] = jsonl_alerts(jsonl)
    assert alert["text"] == "layout changed: 40 of 50 links are new at once (adopted without an alert each)"
    assert alert["url"] == HOME and alert["alert_id"].startswith(f"{watch.id}-layout-")
    assert {HOME + path for path in new} <= stored_urls(store, watch), "the new links are known from now on"
    processor.handle(ok_task(watch, *new, "2026/fresh"))
    assert [a["url"] for a in jsonl_alerts(jsonl)][1:] == [HOME + "2026/fresh"], "then news alert one by one again"


def test_a_few_new_links_on_a_small_page_are_news_not_a_redesign(processor, watch, jsonl) -> None:
    processor.handle(ok_task(watch, "a", "b"))
    processor.handle(ok_task(watch, "a", "b", "c", "d", "e"))
    assert [a["url"] for a in jsonl_alerts(jsonl)] == [HOME + p for p in ("c", "d", "e")]


def test_a_first_check_without_links_is_not_the_baseline(processor, watch, jsonl, store, index) -> None:
    processor.handle(ok_task(watch))  # a consent wall or a script-only page: no links
    assert not index.mark(watch.id).baselined
    assert store.get_watch(watch.id).last_status.startswith("ok (no links found")
    processor.handle(ok_task(watch, "a", "b", "c"))  # the real page: its baseline, no alerts
    assert jsonl_alerts(jsonl) == [] and index.mark(watch.id).baselined
    processor.handle(ok_task(watch, "a", "b", "c", "d"))
    assert [a["url"] for a in jsonl_alerts(jsonl)] == [HOME + "d"]


# --- reappearance: a link that comes back after renotify_after is new again ------------------------
DAY = 86400.0


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    """The processor's and the index's clock, moved by hand: ``clock[0] += DAY``."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    return now


def test_a_link_back_within_renotify_after_is_not_new(processor, watch, jsonl, clock) -> None:
    processor.handle(ok_task(watch, "a", "b"))  # the baseline
    clock[0] += DAY
    processor.handle(ok_task(watch, "a"))       # b leaves the page ...
    clock[0] += 20 * DAY
    processor.handle(ok_task(watch, "a", "b"))  # ... and is back 21 days later
    assert jsonl_alerts(jsonl) == []


def test_a_link_back_after_renotify_after_alerts_once_more(store, index, jsonl, watch, clock) -> None:
    processor = Processor(store, index, [jsonl],
                          layout=SMALL_PAGES, reappearance=Reappearance(renotify_after=7 * DAY))
    processor.handle(ok_task(watch, "a", "b"))
    for _ in range(8):  # b is gone for eight daily checks
        clock[0] += DAY
        processor.handle(ok_task(watch, "a"))
    clock[0] += DAY
    processor.handle(ok_task(watch, "a", "b"))
    clock[0] += DAY
    processor.handle(ok_task(watch, "a", "b"))  # still there: no second alert
    alerts = jsonl_alerts(jsonl)
    assert [alert["url"] for alert in alerts] == [HOME + "b"]
    assert alerts[0]["alert_id"] != alert_id(watch.id, shorten(HOME + "b"), 0), "a new alert, not the first one's id"
    assert len(store.links(watch.id)) == 2, "the link is recorded once"


def test_links_of_a_watch_left_unchecked_for_months_are_not_new(store, index, jsonl, watch, clock) -> None:
    """A disabled watch, or a home that was down: its links were on its previous check."""
    processor = Processor(store, index, [jsonl],
                          layout=SMALL_PAGES, reappearance=Reappearance(renotify_after=7 * DAY))
    processor.handle(ok_task(watch, "a", "b"))
    clock[0] += 90 * DAY
    processor.handle(ok_task(watch, "a", "b"))
    assert jsonl_alerts(jsonl) == []


def test_a_link_present_all_along_through_daily_checks_is_never_new_again(store, index, jsonl, watch, clock) -> None:
    processor = Processor(store, index, [jsonl], layout=SMALL_PAGES, reappearance=Reappearance(renotify_after=3 * DAY))
    for _ in range(30):
        processor.handle(ok_task(watch, "a"))
        clock[0] += 0.3 * DAY
    assert jsonl_alerts(jsonl) == []


def test_renotify_after_zero_never_alerts_a_link_again(store, index, jsonl, watch, clock) -> None:
    processor = Processor(store, index, [jsonl], layout=SMALL_PAGES, reappearance=Reappearance(renotify_after=0))
    processor.handle(ok_task(watch, "a", "b"))
    clock[0] += DAY
    processor.handle(ok_task(watch, "a"))
    clock[0] += 400 * DAY
    processor.handle(ok_task(watch, "a", "b"))
    assert jsonl_alerts(jsonl) == []


def test_entries_written_before_last_seen_existed_never_make_a_link_new(store, open_index, tmp_path, watch,
                                                                      clock) -> None:
    """An upgraded index: entries ``[url, first_seen]`` and the baseline marker ``1``."""
    before = open_index("old")
    url = HOME + "b"
    before.db.put(b"L%d:%s" % (watch.id, shorten(url).encode()), json.dumps([[url, clock[0] - 400 * DAY]]).encode())
    before.db.put(b"B%d" % watch.id, b"1")
    before.close()
    jsonl = JsonLinesSink(tmp_path / "upgraded.jsonl")
    processor = Processor(store, open_index("old"), [jsonl],
                          layout=SMALL_PAGES, reappearance=Reappearance(renotify_after=7 * DAY))
    processor.handle(ok_task(watch, "a", "b"))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "a"]


# --- broken watches: one alert when a watch has failed for broken_after, one when it recovers ------
def failed_task(watch: Watch, status: str = "error", reason: str = "connection refused") -> Task:
    return Task(watch.url, watch.id, [], status=status, error=reason)


def test_a_watch_failing_past_broken_after_alerts_once_then_once_on_recovery(store, index, jsonl, watch,
                                                                               clock) -> None:
    processor = Processor(store, index, [jsonl], layout=SMALL_PAGES, health=HealthRule(broken_after=6 * 3600))
    processor.handle(ok_task(watch, "a"))
    for _ in range(10):  # failing for 9 hours, checked hourly
        processor.handle(failed_task(watch))
        clock[0] += 3600
    assert [alert["text"] for alert in jsonl_alerts(jsonl)] == \
        ["watch failing for 6h: error: connection refused"]
    processor.handle(failed_task(watch, "skipped", "host disabled until 2027-01-01T00:00:00Z"))
    processor.handle(ok_task(watch, "a"))
    processor.handle(ok_task(watch, "a"))
    texts = [alert["text"] for alert in jsonl_alerts(jsonl)]
    assert texts[1:] == ["watch recovered after failing for 10h"], texts
    assert {alert["url"] for alert in jsonl_alerts(jsonl)} == {watch.url}, "the alerts name the page"
    assert store.get_watch(watch.id).last_status == "ok"


def test_a_short_failure_and_a_short_host_cooldown_alert_nothing(store, index, jsonl, watch, clock) -> None:
    processor = Processor(store, index, [jsonl], layout=SMALL_PAGES, health=HealthRule(broken_after=6 * 3600))
    processor.handle(ok_task(watch, "a"))
    for status in ("error", "skipped", "error"):  # 3 hours in all
        processor.handle(failed_task(watch, status))
        clock[0] += 3600
    processor.handle(ok_task(watch, "a"))
    for _ in range(5):  # failing again: the clock starts again at the first failure
        processor.handle(failed_task(watch))
        clock[0] += 3600
    assert jsonl_alerts(jsonl) == []


def test_a_broken_watch_alerts_once_even_when_its_failures_are_replayed(store, index, jsonl, watch, clock) -> None:
    """A group holding several failures of one watch, and a processor restarted meanwhile."""
    processor = Processor(store, index, [jsonl], layout=SMALL_PAGES, health=HealthRule(broken_after=60))
    processor.handle(failed_task(watch))
    clock[0] += 120
    processor.handle_group([failed_task(watch), failed_task(watch)])
    Processor(store, index, [jsonl], layout=SMALL_PAGES, health=HealthRule(broken_after=60)).handle(failed_task(watch))
    assert len(jsonl_alerts(jsonl)) == 1


# --- baseline sanity: a consent wall or an error page is neither the baseline nor news ------------
def stories(n: int, *extra: str) -> list[str]:
    return [f"story{i}" for i in range(n)] + list(extra)


def test_a_first_check_with_a_few_links_is_not_the_baseline(store, index, jsonl, watch) -> None:
    processor = Processor(store, index, [jsonl])  # baseline_min_links = 5
    processor.handle(ok_task(watch, "consent", "privacy"))
    assert store.get_watch(watch.id).last_status.startswith("ok (only 2 links: not taken as the baseline yet")
    processor.handle(ok_task(watch, *stories(40)))  # the real page: its baseline
    processor.handle(ok_task(watch, *stories(40, "scoop")))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "scoop"]


def test_a_small_page_is_its_own_baseline_after_three_checks(store, index, jsonl, watch) -> None:
    processor = Processor(store, index, [jsonl])
    for _ in range(3):
        processor.handle(ok_task(watch, "a", "b"))
    processor.handle(ok_task(watch, "a", "b", "c"))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "c"]


def test_a_consent_wall_after_the_baseline_alerts_nothing_and_the_page_comes_back_as_it_was(
        store, index, jsonl, watch) -> None:
    processor = Processor(store, index, [jsonl])
    processor.handle(ok_task(watch, *stories(40)))
    processor.handle(ok_task(watch, "accept-all", "privacy-settings"))
    assert "only 2 of the page's 40 links" in store.get_watch(watch.id).last_status
    processor.handle(ok_task(watch, *stories(40, "scoop")))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "scoop"]
    assert HOME + "accept-all" in stored_urls(store, watch), "recorded all the same: never new later"


def test_a_slimmer_page_that_stays_is_taken_as_it_is(store, index, jsonl, watch) -> None:
    processor = Processor(store, index, [jsonl])
    processor.handle(ok_task(watch, *stories(40)))
    for _ in range(3):
        processor.handle(ok_task(watch, *stories(5)))
    processor.handle(ok_task(watch, *stories(5, "scoop")))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "scoop"]


# --- query parameters a watch's links are compared without ----------------------------------------
def test_a_parameter_appended_per_request_is_found_and_alerts_nothing(processor, watch, jsonl, store) -> None:
    for check in range(4):
        processor.handle(ok_task(watch, *(f"story/{n}?sid=s{check}x" for n in range(5))))
    assert jsonl_alerts(jsonl) == []
    assert store.watch_states({watch.id})[watch.id].volatile_params == "sid"
    processor.handle(ok_task(watch, *(f"story/{n}?sid=s9x" for n in range(6))))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "story/5"], "a real new story still alerts"


def test_ignoring_a_parameter_and_ceasing_to_makes_no_known_link_new(processor, watch, jsonl, store) -> None:
    processor.handle(ok_task(watch, "a?cb=1", "b?cb=1&id=2"))
    store.set_ignore_params(watch.id, ["cb"])
    processor.handle(ok_task(watch, "a?cb=2", "b?id=2&cb=2", "c?cb=2"))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "c"]
    store.set_ignore_params(watch.id, [])
    processor.handle(ok_task(watch, "a?cb=3", "b?id=2&cb=3", "c?cb=3"))
    processor.handle(ok_task(watch, "a?cb=3", "b?id=2&cb=3", "c?cb=3", "d?cb=3"))
    assert [alert["url"] for alert in jsonl_alerts(jsonl)] == [HOME + "c", HOME + "d?cb=3"]


def test_two_featured_stories_changing_at_once_alert_and_teach_nothing(processor, watch, jsonl, store) -> None:
    processor.handle(ok_task(watch, "politics/article?id=5", "sports/article?id=9", "about", "contact"))
    processor.handle(ok_task(watch, "politics/article?id=6", "sports/article?id=10", "about", "contact"))
    processor.handle(ok_task(watch, "politics/article?id=6", "sports/article?id=10", "about", "contact"))
    assert len(jsonl_alerts(jsonl)) == 2
    processor.handle(ok_task(watch, "politics/article?id=7", "sports/article?id=10", "about", "contact"))
    assert len(jsonl_alerts(jsonl)) == 3 and store.watch_states({watch.id})[watch.id].volatile_params == ""


def test_a_parameter_renewing_a_few_links_twice_in_a_row_is_ignored_from_then_on(processor, watch, jsonl,
                                                                                  store) -> None:
    for check in range(5):
        processor.handle(ok_task(watch, f"a?sid={check}", f"b?sid={check}", "about"))
    assert len(jsonl_alerts(jsonl)) == 2, "the first renewal alerts (it may be news), the second teaches"
    assert store.watch_states({watch.id})[watch.id].volatile_params == "sid"


def test_empty_checks_do_not_wear_a_doubt_down(store, index, jsonl, watch) -> None:
    """A baselined page, then empty maintenance pages, then a challenge with two links."""
    processor = Processor(store, index, [jsonl])
    processor.handle(ok_task(watch, *stories(40)))
    for _ in range(3):
        processor.handle(ok_task(watch))
    processor.handle(ok_task(watch, "challenge", "help"))
    assert jsonl_alerts(jsonl) == []

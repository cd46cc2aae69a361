"""A watch's CSS selector on its way: the job and task schemas, what makes a body
"unchanged", the store's selector columns, and the processor on real SQLite and LevelDB
files (a result found under a former selector is dropped; the first check under a new one
is adopted without alerts)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from controller.processor import LayoutRule, Processor
from monitor.check import content_hash
from monitor.fetch import Page
from monitor.linkindex import LinkIndex
from monitor.messages import MAX_SELECTOR, InvalidMessage, Job, Task
from monitor.parsing import extract_links
from monitor.parsing.regions import BadSelector, check_selector
from monitor.sinks import JsonLinesSink
from monitor.store import Store, Validators

HOME = "https://news.example/"


# --- messages -----------------------------------------------------------------------------------
def test_a_job_carries_its_selector_and_a_task_brings_it_back() -> None:
    job = Job(HOME, 3, 1.0, token="t", selector="main, #latest")
    assert Job.from_bytes(job.to_bytes()) == job
    assert Job.from_bytes(Job(HOME, 3).to_bytes()).selector is None
    task = Task(HOME, 3, [], selector="main")
    assert Task.from_bytes(task.to_bytes()).selector == "main"


@pytest.mark.parametrize("selector, reason", [
    (["main"], "wrong type"), (7, "wrong type"), ("", "'selector' is empty"), ("  ", "'selector' is empty"),
    ("a" * (MAX_SELECTOR + 1), "longer than"), ("main\ud800", "not valid text"),
])
def test_a_bad_selector_field_is_refused(selector, reason: str) -> None:
    body = json.dumps({"baseUrl": HOME, "id": 1, "selector": selector}).encode()
    with pytest.raises(InvalidMessage, match=reason):
        Job.from_bytes(body)


@pytest.mark.parametrize("selector, reason", [
    ("main[", "bad selector 'main\\[': "), ("a >", "bad selector"), (":nope", "bad selector"),
    ("", "an empty selector"), ("a" * (MAX_SELECTOR + 1), f"at most {MAX_SELECTOR} characters"),
])
def test_selectors_are_judged_by_soupsieve_with_a_one_line_reason(selector: str, reason: str) -> None:
    with pytest.raises(BadSelector, match=reason) as refused:
        check_selector(selector)
    assert "\n" not in str(refused.value)
    assert check_selector("main, #latest > ul li:nth-child(2n) a[href^='/']")


def _selectors(store, watch_id: int) -> tuple[str, str]:
    state = store.watch_states({watch_id})[watch_id]
    return state.selector, state.links_selector


def test_a_body_hashed_under_another_selector_is_not_unchanged() -> None:
    page = Page(HOME, 200, b"<main><a href=/a>a</a></main>", "utf-8", 10)
    assert content_hash(page, "main") != content_hash(page) != content_hash(page, "nav")
    assert content_hash(page, None) == content_hash(page), "a watch without a selector hashes as before"


# --- the store ----------------------------------------------------------------------------------
def test_a_new_selector_drops_the_validators_and_makes_the_watch_due_with_a_new_job(store: Store) -> None:
    watch = store.add_watch(HOME, 3600, selector="main", now=1000.0)
    assert _selectors(store, watch.id) == ("main", "main"), "a new watch's first check is its baseline"
    store.mark_in_flight([watch.id], 1500.0)
    store.conn.execute("UPDATE watches SET etag = 'e', content_hash = 'h', next_due = 9999 WHERE id = ?", (watch.id,))

    changed = store.set_selector(watch.id, "main, aside", now=2000.0)
    assert changed.selector == "main, aside" and (changed.etag, changed.content_hash) == (None, None)
    assert changed.in_flight_since is None and changed.next_due == 2000.0
    assert [due.selector for due in store.due_watches(2000.0, 10)] == ["main, aside"]
    assert _selectors(store, watch.id) == ("main, aside", "main"), "waiting for its first check"

    store.conn.execute("UPDATE watches SET etag = 'e', next_due = 9999 WHERE id = ?", (watch.id,))
    assert store.set_selector(watch.id, "main, aside").etag == "e", "the same selector again changes nothing"


# --- the processor --------------------------------------------------------------------------------
@pytest.fixture
def index(tmp_path: Path) -> Iterator[LinkIndex]:
    index = LinkIndex(tmp_path / "ldb")
    yield index
    index.close()


@pytest.fixture
def jsonl(tmp_path: Path) -> JsonLinesSink:
    return JsonLinesSink(tmp_path / "alerts.jsonl")


def _task(watch_id: int, selector: str | None, *paths: str, fetched_at: float) -> Task:
    return Task(HOME, watch_id, [{"url": HOME + path, "text": path} for path in paths], fetched_at=fetched_at,
                content_hash=f"hash-{selector}-{len(paths)}", selector=selector)


def _alerted(sink: JsonLinesSink) -> list[str]:
    lines = sink.path.read_text().splitlines() if sink.path.exists() else []
    return [json.loads(line)["url"].removeprefix(HOME) for line in lines]


def test_a_changed_selector_is_adopted_without_alerts_and_a_former_ones_result_is_dropped(
        store: Store, index: LinkIndex, jsonl: JsonLinesSink) -> None:
    processor = Processor(store, index, [jsonl], layout=LayoutRule(baseline_min_links=1))
    watch = store.add_watch(HOME, 300, selector="main")
    processor.handle(_task(watch.id, "main", "m1", "m2", fetched_at=1.0))  # the baseline
    processor.handle(_task(watch.id, "main", "m1", "m2", "m3", fetched_at=2.0))
    assert _alerted(jsonl) == ["m3"]

    store.set_selector(watch.id, "main, aside")
    processor.handle(_task(watch.id, "main", "m1", "m2", "m3", "m4", fetched_at=3.0))  # a job issued before
    assert _alerted(jsonl) == ["m3"] and "m4" not in {link.url.removeprefix(HOME) for link in store.links(watch.id)}
    assert store.get_watch(watch.id).content_hash is None, "nothing of the former selector's result is kept"

    processor.handle(_task(watch.id, "main, aside", "m1", "m2", "m3", "a1", "a2", fetched_at=4.0))
    assert _alerted(jsonl) == ["m3"], "the links the wider region adds were there before: no alert"
    assert {"a1", "a2"} <= {link.url.removeprefix(HOME) for link in store.links(watch.id)}
    assert _selectors(store, watch.id) == ("main, aside", "main, aside")
    assert store.get_watch(watch.id).content_hash == "hash-main, aside-5"

    processor.handle(_task(watch.id, "main, aside", "m1", "m2", "m3", "a1", "a2", "a3", fetched_at=5.0))
    assert _alerted(jsonl) == ["m3", "a3"]


def test_an_error_under_any_selector_is_the_watchs_status(store: Store, index: LinkIndex, jsonl: JsonLinesSink) -> None:
    processor = Processor(store, index, [jsonl], layout=LayoutRule(baseline_min_links=1))
    watch = store.add_watch(HOME, 300, selector="#latest")
    processor.handle(Task(HOME, watch.id, [], status="error", error="selector '#latest' matched nothing on the page",
                          fetched_at=1.0))
    assert store.get_watch(watch.id).last_status == "error: selector '#latest' matched nothing on the page"
    assert store.get_watch(watch.id).in_flight_since is None
    assert store.get_watch(watch.id).content_hash is None and not store.links(watch.id)


def test_validators_recorded_under_the_current_selector_travel_with_the_next_job(store: Store, index: LinkIndex,
                                                                               jsonl: JsonLinesSink) -> None:
    processor = Processor(store, index, [jsonl], layout=LayoutRule(baseline_min_links=1))
    watch = store.add_watch(HOME, 300, selector="main")
    processor.handle(_task(watch.id, "main", "m1", fetched_at=1.0))
    [due] = store.due_watches(store.get_watch(watch.id).next_due, 10)
    assert (due.selector, Validators(due.etag, due.last_modified, due.content_hash)) == \
        ("main", Validators(None, None, "hash-main-1"))


@pytest.mark.parametrize("selector", [":is(nav, main) a", ":is(main) a", "body > :is(main, section) a"])
def test_a_selector_lexbor_reads_otherwise_is_read_by_the_reference_engine(selector: str) -> None:
    page = b"<body><nav><a href=/n>N</a></nav><main><p><a href=/a>A</a></main><footer><a href=/f>F</a></footer>"
    expected = [link.url for link in extract_links(page, "http://s.test/", engine="html5lib", selector=selector)]
    assert [link.url for link in extract_links(page, "http://s.test/", selector=selector)] == expected
    assert "http://s.test/a" in expected

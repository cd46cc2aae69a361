"""The functions the ``monitor`` commands and the web front share, called directly against
a real store: they return what they did and raise the CLI's errors, printing nothing."""
from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from monitor.cli.common import UsageError
from monitor.cli.filters import add_filter, remove_filter
from monitor.cli.fleet import add_proxy, enable_host
from monitor.cli.sinks import add_sink, header_lines, remove_sink, retry_deliveries, sink_options
from monitor.cli.watches import export_watches, import_rows, import_watches
from monitor.config import Config
from monitor.store import CheckResult, LinkRecord, NotFound, Store
from test_cli import Monitor, assert_usage_error, monitor  # noqa: F401 (fixture)


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(home=tmp_path, allow_private=True)


def test_add_filter_checks_the_rule_and_remove_filter_refuses_a_declared_one(store: Store) -> None:
    watch = store.add_watch("https://news.example/", 300, tag="news")
    rule = add_filter(store, "include", "election", watch.url)
    assert (rule.rule, rule.pattern, rule.watch_id, rule.tag) == ("include", "election", watch.id, None)
    assert store.list_filters() == [rule]
    for args, message in ((("bogus", ""), "unknown rule"), (("noise", "words"), "noise takes no pattern"),
                          (("include", "/[/"), "bad regular expression"), (("noise", None, "9"), "no watch with id 9"),
                          (("noise", None, "1", "news"), "not both")):
        with pytest.raises(UsageError, match=message):
            add_filter(store, *args)
    assert store.list_filters() == [rule], "nothing added"

    store.sync_declared_filters([("noise", "", None, "news")], time.time())
    [declared] = store.declared_filter_ids()
    with pytest.raises(UsageError, match=f"filter {declared} is declared in"):
        remove_filter(store, declared)
    with pytest.raises(NotFound):
        remove_filter(store, 99)
    remove_filter(store, rule.id)
    assert [r.id for r in store.list_filters()] == [declared]


def test_a_sink_is_checked_whole_before_it_is_added(store: Store) -> None:
    assert header_lines(["X-Team: news", "X-Empty:"]) == {"X-Team": "news", "X-Empty": ""}
    with pytest.raises(UsageError, match="write it as 'Name: value'"):
        header_lines(["X-Team news"])
    assert sink_options("s3cret", {"X-Team": "news"}, "15m") == {"secret": "s3cret", "headers": {"X-Team": "news"},
                                                                  "digest": 900}
    with pytest.raises(UsageError, match="--digest: bad interval"):
        sink_options(None, None, "soon")
    for kind, target, options in (("webhook", "https://hooks.example/", {"digest": 900}),
                                  ("webhook", "https://hooks.example/", {"headers": {"X Team": "news"}}),
                                  ("pigeon", "coo", {})):
        with pytest.raises(UsageError):
            add_sink(store, kind, target, None, options)
    assert store.list_sinks() == []

    sink = add_sink(store, "webhook", "https://hooks.example/T0KEN", None, {"secret": "s"}, tag="news")
    assert (sink.name, sink.tag, sink.options) == ("webhook-1", "news", {"secret": "s"})
    with pytest.raises(UsageError, match="exists already"):
        add_sink(store, "webhook", "https://hooks.example/other", "webhook-1", {})
    remove_sink(store, "webhook-1")
    with pytest.raises(NotFound):
        remove_sink(store, "webhook-1")


def test_retry_deliveries_makes_the_failed_ones_pending_and_refuses_an_unknown_sink(store: Store) -> None:
    now = time.time()
    watch_id = store.add_watch("https://news.example/", 300).id
    store.add_sink("hook", "webhook", "https://hooks.example/", {}, None, None, now)
    links = [LinkRecord(f"https://news.example/{n}", f"Story {n}", f"code0{n}", now) for n in range(2)]
    store.record_results([CheckResult(watch_id, now, "ok", 200, 5, links, {link.url: link.code for link in links})])
    store.delivery_failed("hook", ["code00", "code01"], "HTTP 500", now, 1.0, 1.0, max_attempts=1)

    with pytest.raises(UsageError, match="no sink named 'other'"):
        retry_deliveries(store, None, "other")
    assert retry_deliveries(store, ["code01"]) == 1
    assert [d["alert_id"] for d in store.failed_deliveries()] == ["code00"]
    assert retry_deliveries(store, None, "hook") == 1
    assert store.failed_deliveries() == []


def test_import_counts_and_says_each_entry_and_export_reads_back(config: Config, store: Store) -> None:
    store.add_watch("http://127.0.0.1:8/", 300)
    rows = import_rows(b"url,interval,name,tag\nhttp://127.0.0.1:7/,10m,Seven,news\nhttp://127.0.0.1:8/\n"
                       b"nowhere,5m\nhttp://127.0.0.1:6/,5 parsecs\n", "watches.csv")
    said: list[str] = []
    imported = import_watches(config, store, rows, said.append)
    assert (imported.added, imported.duplicates, imported.invalid) == (1, 1, 2)
    assert imported.messages == said and [line.split(":")[0] for line in said] == ["line 4", "line 5"]
    with pytest.raises(UsageError, match="unknown format 'bogus'"):
        import_rows(b"http://127.0.0.1:5/", "watches.txt", "bogus")
    with pytest.raises(UsageError, match="cannot read the body"):
        import_rows(b"not xml", "the body", "opml")

    out = io.StringIO()
    export_watches(store, out)
    assert out.getvalue().splitlines() == ["url,interval,name,tag,enabled", "http://127.0.0.1:8/,5m,,,1",
                                           "http://127.0.0.1:7/,10m,Seven,news,1"]
    again = import_watches(config, store, import_rows(out.getvalue().encode(), "export.csv"))
    assert (again.added, again.duplicates, again.invalid) == (0, 2, 0)


def test_add_proxy_untested_and_enable_host_name_what_is_wrong(config: Config, store: Store) -> None:
    proxy, warning = add_proxy(config, store, " http://user:pw@10.0.0.5:3128 ", test=False)
    assert (proxy.url, warning) == ("http://user:pw@10.0.0.5:3128", None)
    for url, message in (("http://user:pw@10.0.0.5:3128", "already in the pool"), ("ftp://x:1", "starts with one of"),
                         ("http://10.0.0.6", "needs a host and a port")):
        with pytest.raises(UsageError, match=message):
            add_proxy(config, store, url, test=False)
    with pytest.raises(UsageError, match="give the host name"):
        enable_host(config, store, " . ")
    with pytest.raises(NotFound, match="nowhere.example is not disabled"):
        enable_host(config, store, "Nowhere.Example.")


def test_what_is_not_found_is_still_a_usage_error_of_one_line_for_the_cli(monitor: Monitor) -> None:
    assert_usage_error(monitor("hosts", "enable", "nowhere.example"), "nowhere.example is not disabled")
    assert_usage_error(monitor("sink", "remove", "nope"), "no sink named 'nope'")
    assert_usage_error(monitor("sink", "test", "nope"), "no sink named 'nope'")
    assert_usage_error(monitor("filter", "remove", "7"), "no filter with id 7")
    assert_usage_error(monitor("filter", "remove", "seven"), "'seven' is not a filter id")

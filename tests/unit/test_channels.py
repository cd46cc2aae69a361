"""Sink kinds, their targets and masks, the delivery bookkeeping and the Atom feeds."""
from __future__ import annotations

from pathlib import Path

import feedparser
import pytest

from monitor.sinks.channels import KINDS, BadTarget, Email, build, mask
from monitor.sinks.feeds import feed_name, render
from monitor.store import CheckResult, LinkRecord, open_store


@pytest.mark.parametrize("target, shown", [
    ("https://hooks.example/T0/B1/secret", "https://hooks.example/***"),
    ("smtp://me:pw@mail.example:587?to=a@b.example&starttls=1", "smtp://me:***@mail.example:587/***"),
    ("tgram://123456:AAbbcc/987/", "tgram://***/***"),
    ("ntfys://a-secret-topic", "ntfys://***"),
    ("json://127.0.0.1:8080/hook", "json://127.0.0.1:8080/***"),
    ("not a url", "***"),
])
def test_targets_are_shown_without_their_secrets(target: str, shown: str) -> None:
    assert mask(target) == shown


def test_every_kind_documents_its_target() -> None:
    assert sorted(KINDS) == ["apprise", "email", "webhook"]
    for name, channel in KINDS.items():
        assert channel.__doc__.startswith(f"{name} TARGET")


@pytest.mark.parametrize("kind, target, reason", [
    ("webhook", "ftp://x.example/", "http:// or https://"),
    ("email", "smtp://mail.example", "to=ADDRESS"),
    ("email", "imap://mail.example?to=a@b.example", "smtp://"),
    ("apprise", "nonsense://x", "not an Apprise URL"),
    ("pager", "x", "unknown sink kind 'pager'"),
])
def test_a_bad_target_is_refused_with_one_line(kind: str, target: str, reason: str) -> None:
    with pytest.raises(BadTarget, match=reason):
        build(kind, target, {})


def test_a_mail_has_the_link_text_as_subject_and_the_alert_id() -> None:
    mail = Email("smtp://mail.example?to=a@b.example&to=c@d.example", {}).message(
        {"alert_id": "3-abc", "watch_id": 3, "baseUrl": "https://u:pw@news.example/", "watch_name": None,
         "tag": None, "url": "https://news.example/story", "text": "Big story", "first_seen": 1.7e9})
    assert mail["Subject"] == "Big story" and mail["To"] == "a@b.example, c@d.example"
    assert "3-abc" in mail["Message-ID"] and mail["X-Monitor-Alert-Id"] == "3-abc"
    assert "pw" not in mail.as_string(), "the watch's password is not in the mail"


def test_a_digest_is_one_mail_grouped_by_page_in_text_and_html() -> None:
    email = Email("smtp://mail.example?to=a@b.example", {"digest": 900})
    assert (email.hold, email.batch) == (900.0, 500)
    alerts = [{"alert_id": f"{watch}-{n}", "watch_id": watch, "baseUrl": f"https://u:pw@site{watch}.example/",
               "watch_name": "Site one" if watch == 1 else None, "tag": None, "url": f"https://site{watch}.example/{n}",
               "text": f"Story <{n}>", "first_seen": 1.7e9 + n} for watch, n in ((1, 1), (2, 2), (1, 3))]
    mail = email.digest(alerts)
    assert mail["Subject"] == "3 new links on 2 pages"
    assert mail["X-Monitor-Alert-Ids"].split() == ["1-1", "2-2", "1-3"]
    text = mail.get_body(("plain",)).get_content()
    assert text.index("Site one") < text.index("https://site1.example/1") < text.index("https://site1.example/3") \
        < text.index("site2.example/\n") < text.index("https://site2.example/2"), "grouped by page, in order"
    markup = mail.get_body(("html",)).get_content()
    for watch, n in ((1, 1), (2, 2), (1, 3)):
        assert f'href="https://site{watch}.example/{n}">Story &lt;{n}&gt;</a>' in markup
    assert "pw" not in mail.as_string(), "the watches' passwords are not in the mail"
    assert Email("smtp://mail.example?to=a@b.example", {}).batch == 1, "one mail per alert by default"
    with pytest.raises(BadTarget, match="digest 'soon'"):
        Email("smtp://mail.example?to=a@b.example", {"digest": "soon"})


def _alert(store, watch_id: int, url: str, now: float) -> None:
    store.record_results([CheckResult(watch_id=watch_id, checked_at=now, status="ok", http_status=200, elapsed_ms=1,
                                      links=[LinkRecord(url, "T", url[-6:], now)], alert_ids={url: f"{watch_id}-{url[-6:]}"},
                                      fetched_at=now)])


def test_deliveries_are_queued_with_the_alert_retried_with_backoff_and_given_up(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db.sqlite3")
    watch = store.add_watch("https://news.example/", 300, tag="news")
    other = store.add_watch("https://other.example/", 300)
    store.add_sink("all", "webhook", "https://h.example/", {}, None, None, 0.0)
    store.add_sink("tagged", "webhook", "https://h.example/", {}, None, "news", 0.0)
    store.add_sink("other", "webhook", "https://h.example/", {}, other.id, None, 0.0)
    _alert(store, watch.id, "https://news.example/aaaaaa", 10.0)
    _alert(store, watch.id, "https://news.example/aaaaaa", 11.0)  # the same alert again queues nothing
    assert [len(store.due_deliveries(name, 10.0, 100)) for name in ("all", "tagged", "other")] == [1, 1, 0]

    waits = []
    now = 10.0
    gave_up = []
    for _ in range(4):
        gave_up.append(store.delivery_failed("all", ["1-aaaaaa"], "HTTP 500", now, 1.0, 5.0, 4))
        waits.append((store.next_delivery_at("all") or now) - now)
    assert waits == [1.0, 2.0, 4.0, 0.0], "doubling, then given up (nothing pending)"
    assert gave_up == [0, 0, 0, 1]
    [failed] = store.failed_deliveries()
    assert (failed["sink"], failed["attempts"], failed["last_error"]) == ("all", 4, "HTTP 500")
    assert store.retry_failed(20.0, "all") == 1 and store.due_deliveries("all", 20.0, 10)[0]["attempts"] == 0
    store.delivered("all", ["1-aaaaaa"], 21.0)
    sink = {s.name: s for s in store.list_sinks()}["all"]
    assert (sink.delivered, sink.pending, sink.failed, sink.last_error) == (1, 0, 0, "HTTP 500")

    store.remove_watch(watch.id)  # its alerts go, and with them what was still to deliver
    assert store.due_deliveries("tagged", 30.0, 10) == []
    store.remove_sink("all")
    assert [s.name for s in store.list_sinks()] == ["other", "tagged"]
    store.close()


def test_a_feed_is_valid_atom_newest_first() -> None:
    alerts = [{"alert_id": f"1-{n}", "watch_id": 1, "baseUrl": "https://news.example/", "watch_name": "News",
               "tag": None, "url": f"https://news.example/{n}", "text": f"Story <{n}> & more", "first_seen": 100.0 - n}
              for n in range(3)]
    feed = feedparser.parse(render("All new links", "all.atom", alerts, 200.0))
    assert not feed.bozo, feed.bozo_exception
    assert [entry.link for entry in feed.entries] == [f"https://news.example/{n}" for n in range(3)]
    assert feed.entries[0].title == "Story <0> & more"
    assert feed_name(tag="a/b c") == "tag-a_b_c.atom" and feed_name(watch_id=4) == "watch-4.atom"


def test_a_restarted_notifier_rewrites_only_the_feeds_with_new_alerts(tmp_path: Path) -> None:
    from controller.notifier import Notifier
    from monitor.config import Config

    config = Config(home=tmp_path)
    store = open_store(config.db_path)
    watches = [store.add_watch(f"https://site{n}.example/", 300) for n in range(3)]
    for watch in watches:
        _alert(store, watch.id, f"https://site{watch.id}.example/aaaaa{watch.id}", 10.0)
    Notifier(config, store).refresh_feeds(100.0)
    assert sorted(p.name for p in config.feeds_dir.glob("*.atom")) == ["all.atom", "watch-1.atom", "watch-2.atom",
                                                                       "watch-3.atom"]
    for feed in config.feeds_dir.glob("*.atom"):
        feed.write_text("untouched")
    _alert(store, watches[1].id, "https://site2.example/bbbbbb", 20.0)
    Notifier(config, store).refresh_feeds(200.0)  # a new process
    rewritten = sorted(p.name for p in config.feeds_dir.glob("*.atom") if p.read_text() != "untouched")
    assert rewritten == ["all.atom", "watch-2.atom"]
    store.close()


def test_a_digest_is_due_once_its_oldest_alert_waited_or_it_is_full_and_a_retry_waits_no_more(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db.sqlite3")
    watch = store.add_watch("https://news.example/", 300)
    store.add_sink("mail", "email", "smtp://m.example?to=a@b.example", {"digest": 60}, None, None, 0.0)
    assert store.next_delivery_at("mail", 60.0, 3) is None
    _alert(store, watch.id, "https://news.example/aaaaaa", 100.0)
    _alert(store, watch.id, "https://news.example/bbbbbb", 130.0)
    assert store.next_delivery_at("mail", 60.0, 3) == 160.0, "the oldest alert has waited 60 s"
    assert store.next_delivery_at("mail") == 100.0, "without holding: at once"
    _alert(store, watch.id, "https://news.example/cccccc", 140.0)
    assert store.next_delivery_at("mail", 60.0, 3) == 100.0, "three waiting: full, due at once"
    assert [s.pending for s in store.list_sinks()] == [3], "held alerts show as pending"

    ids = [alert["alert_id"] for alert in store.due_deliveries("mail", 160.0, 500)]
    store.delivery_failed("mail", ids, "refused", 160.0, 10.0, 100.0, 5)
    store.delivery_failed("mail", ids, "refused", 170.0, 10.0, 100.0, 5)
    assert store.next_delivery_at("mail", 60.0, 500) == 190.0, "a failed digest is tried again after its backoff"
    assert store.list_sinks()[0].failing_since == 160.0, "failing since the first failure, not the last"
    store.delivered("mail", ids, 190.0)
    assert (store.next_delivery_at("mail", 60.0, 500), store.list_sinks()[0].failing_since) == (None, None)
    store.close()

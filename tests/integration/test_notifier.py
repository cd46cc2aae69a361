"""Alert delivery through the notifier to real receivers on loopback: a webhook that fails
on purpose, an SMTP server, Apprise's json:// to a webhook; Atom feeds read by feedparser."""
from __future__ import annotations

import hashlib
import hmac
import json
import signal

import feedparser
import pytest

from tests.helpers import wait_for
from tests.receivers import SmtpReceiver, WebhookReceiver

FAST_RETRIES = {"sink_retry_first": 0.2, "sink_retry_max": 1.0, "sink_max_attempts": 4}
INITIAL = [("/a", "First story"), ("/b", "Second story")]


@pytest.fixture
def receivers():
    started: list = []

    def start(kind=WebhookReceiver, **options):
        started.append(kind(**options))
        return started[-1]
    yield start
    for receiver in started:
        receiver.stop()


def _watch(pipeline, url: str, tag: str | None = None) -> int:
    return pipeline.store.add_watch(url, 3600, tag=tag).id


def _check(pipeline, watch_id: int) -> None:
    before = pipeline.checks_done(watch_id)
    pipeline.publish_job(watch_id)
    wait_for(lambda: pipeline.checks_done(watch_id) > before, timeout=60, message="the check")


def _new_links_alerted(pipeline, site, *stories: tuple[str, str]) -> None:
    """Start the processor, the notifier and a worker; watch a page (its baseline), publish
    ``(path, text)`` stories on it and check it again."""
    pipeline.processor()
    pipeline.notifier()
    pipeline.worker()
    watch_id = _watch(pipeline, site.add_page("/", INITIAL))
    _check(pipeline, watch_id)
    for path, text in stories:
        site.publish("/", path, text)
    _check(pipeline, watch_id)


def _sinks(pipeline) -> dict[str, dict]:
    return {row["name"]: row for row in map(json.loads, pipeline.cli("sink", "list", "--json").stdout.splitlines())}


def _expected_ids(pipeline) -> set[str]:
    return {alert["alert_id"] for alert in map(json.loads, pipeline.cli("alerts", "--json").stdout.splitlines())}


def test_a_webhook_that_fails_at_first_gets_every_alert_signed_and_the_sink_list_says_so(pipeline, site, receivers):
    hook = receivers(fail_first=2)
    pipeline.configure(**FAST_RETRIES)
    added = pipeline.cli("sink", "add", "webhook", hook.url, "--name", "hook", "--secret", "s3cret",
                         "--header", "X-Team: news")
    assert added.returncode == 0, added.stderr
    _new_links_alerted(pipeline, site, *((f"/new{n}", f"New story {n}") for n in range(3)))

    wait_for(lambda: len(hook.alerts()) == 3, timeout=30, message="the three alerts at the webhook")
    assert {alert["url"] for alert in hook.alerts()} == {site.url(f"/new{n}") for n in range(3)}
    assert {alert["alert_id"] for alert in hook.alerts()} == _expected_ids(pipeline)
    headers, body = hook.accepted[0]
    expected = hmac.new(b"s3cret", json.dumps(body, ensure_ascii=False).encode(), hashlib.sha256).hexdigest()
    assert headers["x-monitor-signature"] == f"sha256={expected}" and headers["x-team"] == "news"
    wait_for(lambda: _sinks(pipeline)["hook"]["delivered"] == 3, timeout=10, message="the delivery recorded")
    row = _sinks(pipeline)["hook"]
    assert (row["pending"], row["failed"], row["target"]) == (0, 0, f"{hook.url.rsplit('/', 1)[0]}/***")
    assert "HTTP 500" in row["last_error"], "the failures before are shown"


def test_each_alert_is_a_mail_and_apprise_reaches_its_json_endpoint(pipeline, site, receivers):
    smtp = receivers(SmtpReceiver)
    relay = receivers()
    mail_target = f"smtp://127.0.0.1:{smtp.port}?to=desk@news.example&from=monitor@news.example"
    assert pipeline.cli("sink", "add", "email", mail_target, "--name", "mail").returncode == 0
    apprise_target = relay.url.replace("http://", "json://")
    assert pipeline.cli("sink", "add", "apprise", apprise_target, "--name", "chat").returncode == 0
    _new_links_alerted(pipeline, site, ("/scoop", "A scoop"), ("/follow-up", "A follow-up"))

    wait_for(lambda: len(smtp.messages) == 2, timeout=30, message="two mails")
    assert sorted(mail["Subject"] for mail in smtp.messages) == ["A follow-up", "A scoop"]
    assert all(mail["To"] == "desk@news.example" and mail["X-Monitor-Alert-Id"] for mail in smtp.messages)
    text = smtp.messages[0].get_body(("plain",)).get_content()
    assert site.url("/") in text and "New link on" in text
    wait_for(lambda: len(relay.accepted) == 2, timeout=30, message="two Apprise notifications")
    assert sorted(body["title"] for _, body in relay.accepted) == ["A follow-up", "A scoop"]
    test = pipeline.cli("sink", "test", "mail")
    assert test.returncode == 0 and "delivered" in test.stdout
    wait_for(lambda: len(smtp.messages) == 3, timeout=10, message="the test mail")


def test_a_sink_down_for_long_gives_up_visibly_and_retry_delivers(pipeline, site, receivers):
    hook = receivers()
    hook.down.set()
    other = receivers()
    pipeline.configure(**FAST_RETRIES)
    assert pipeline.cli("sink", "add", "webhook", hook.url, "--name", "down").returncode == 0
    assert pipeline.cli("sink", "add", "webhook", other.url, "--name", "up").returncode == 0
    _new_links_alerted(pipeline, site, ("/c", "Third story"))

    wait_for(lambda: len(other.alerts()) == 1, timeout=30, message="the healthy sink served at once")
    wait_for(lambda: _sinks(pipeline)["down"]["failed"] == 1, timeout=30, message="the failing sink giving up")
    failed = [json.loads(line) for line in pipeline.cli("alerts", "failed", "--json").stdout.splitlines()]
    assert [(f["sink"], f["attempts"]) for f in failed] == [("down", 4)] and "HTTP 500" in failed[0]["last_error"]
    assert hook.requests == 4

    hook.down.clear()
    retried = pipeline.cli("alerts", "retry", "--all", "--sink", "down")
    assert retried.returncode == 0 and "1 delivery" in retried.stdout
    wait_for(lambda: len(hook.alerts()) == 1, timeout=30, message="the retried alert")
    assert hook.alerts()[0]["url"] == site.url("/c")
    wait_for(lambda: _sinks(pipeline)["down"]["delivered"] == 1, timeout=10, message="recorded")
    assert pipeline.cli("alerts", "failed").stdout == "no failed deliveries\n"


def test_sinks_for_a_watch_or_a_tag_get_only_theirs_and_feeds_are_valid_atom(pipeline, site, receivers):
    for_watch, for_tag, for_all = receivers(), receivers(), receivers()
    one = _watch(pipeline, site.add_page("/one", INITIAL))
    two = _watch(pipeline, site.add_page("/two", INITIAL), tag="sport")
    assert pipeline.cli("sink", "add", "webhook", for_watch.url, "--watch", str(one)).returncode == 0
    assert pipeline.cli("sink", "add", "webhook", for_tag.url, "--tag", "sport").returncode == 0
    assert pipeline.cli("sink", "add", "webhook", for_all.url).returncode == 0
    pipeline.processor()
    pipeline.notifier()
    pipeline.worker()
    for watch_id, path in ((one, "/one"), (two, "/two")):
        _check(pipeline, watch_id)
        site.publish(path, f"{path}/news", f"News on {path}")
        _check(pipeline, watch_id)

    wait_for(lambda: len(for_all.alerts()) == 2, timeout=30, message="both alerts to the global sink")
    wait_for(lambda: len(for_watch.alerts()) == 1 and len(for_tag.alerts()) == 1, timeout=30, message="scoped alerts")
    assert for_watch.alerts()[0]["watch_id"] == one
    assert for_tag.alerts()[0]["watch_id"] == two and for_tag.alerts()[0]["tag"] == "sport"

    feeds = pipeline.config.feeds_dir
    wait_for(lambda: len(feedparser.parse(str(feeds / "all.atom")).entries) == 2, timeout=40,
             message="the global feed (rewritten every 10 s at most)")
    for name, url in ((f"watch-{one}.atom", site.url("/one/news")), ("tag-sport.atom", site.url("/two/news"))):
        feed = feedparser.parse(str(feeds / name))
        assert not feed.bozo, feed.bozo_exception
        assert [entry.link for entry in feed.entries] == [url]


def test_killing_the_notifier_and_processor_while_alerts_flow_loses_none(pipeline, site, receivers):
    hook = receivers()
    pipeline.configure(**{**FAST_RETRIES, "sink_max_attempts": 1000})
    assert pipeline.cli("sink", "add", "webhook", hook.url, "--name", "hook").returncode == 0
    processor = pipeline.processor()
    notifier = pipeline.notifier()
    pipeline.worker()
    watch_id = _watch(pipeline, site.add_page("/", INITIAL))
    _check(pipeline, watch_id)
    for round_ in range(6):
        for n in range(5):
            site.publish("/", f"/r{round_}-{n}", f"Round {round_} story {n}")
        if round_ % 2:
            hook.down.set()  # fails now and then
        _check(pipeline, watch_id)
        (notifier if round_ % 2 else processor).restart()  # SIGKILL, then start again
        hook.down.clear()

    expected = _expected_ids(pipeline)
    assert len(expected) == 30
    wait_for(lambda: {alert["alert_id"] for alert in hook.alerts()} == expected, timeout=60,
             message="every alert at the webhook")
    wait_for(lambda: _sinks(pipeline)["hook"]["delivered"] == 30, timeout=10, message="each recorded once")
    duplicates = len(hook.alerts()) - len(expected)
    print(f"notifier chaos: 30 alerts, {duplicates} sent twice (at least once; receivers drop them by alert_id)")
    assert notifier.proc.poll() is None and processor.proc.poll() is None

"""Alert delivery through the notifier to real receivers on loopback: a webhook that fails
on purpose or is down for a while, an SMTP server (one mail per alert, or a digest),
Apprise's json:// to a webhook, sinks and filters declared in the TOML file; Atom feeds
read by feedparser."""
from __future__ import annotations

import hashlib
import hmac
import json
import time

import feedparser
import pytest

from tests.helpers import wait_for
from tests.receivers import SmtpReceiver, WebhookReceiver

FAST_RETRIES = {"sink_retry_first": 0.2, "sink_retry_max": 1.0, "sink_max_attempts": 4}
INITIAL = [("/a", "First story"), ("/b", "Second story")]
# The webhook outage: a minute, some fifteen retries capped at sink_retry_max (4 s).
# DIGEST: long enough for two checks to land in one digest.
DOWN_FOR = 60.0
DIGEST = 10


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


def _mail_text(mail) -> tuple[str, str]:
    return mail.get_body(("plain",)).get_content(), mail.get_body(("html",)).get_content()


def _two_pages_with_news(pipeline, site) -> list[str]:
    """Start the processes; watch two pages (their baselines), publish three stories on one
    and two on the other, check both; return the new links' URLs."""
    pipeline.processor()
    pipeline.worker()
    pages = {path: _watch(pipeline, site.add_page(path, INITIAL)) for path in ("/one", "/two")}
    for watch_id in pages.values():
        _check(pipeline, watch_id)
    stories = [("/one", n) for n in range(3)] + [("/two", n) for n in range(2)]
    for path, n in stories:
        site.publish(path, f"{path}/story-{n}", f"Story {n} on {path}")
    for watch_id in pages.values():
        _check(pipeline, watch_id)
    return [site.url(f"{path}/story-{n}") for path, n in stories]


def test_a_digest_sink_holds_its_alerts_and_sends_one_mail_with_every_link_by_page(pipeline, site, receivers):
    smtp = receivers(SmtpReceiver)
    target = f"smtp://127.0.0.1:{smtp.port}?to=desk@news.example&from=monitor@news.example"
    added = pipeline.cli("sink", "add", "email", target, "--name", "digest", "--digest", f"{DIGEST}s")
    assert added.returncode == 0, added.stderr
    notifier = pipeline.notifier()
    urls = _two_pages_with_news(pipeline, site)

    held = _sinks(pipeline)["digest"]
    assert (held["pending"], held["delivered"], held["digest"], smtp.messages) == (5, 0, DIGEST, []), \
        "held back, and shown as pending"
    notifier.restart()  # what is held back is rows in the store, not memory: a new process sends it
    wait_for(lambda: smtp.messages, timeout=DIGEST + 30, message="the digest")
    wait_for(lambda: _sinks(pipeline)["digest"]["delivered"] == 5, timeout=10, message="the digest recorded")
    [mail] = smtp.messages
    assert mail["Subject"] == "5 new links on 2 pages" and mail["To"] == "desk@news.example"
    text, markup = _mail_text(mail)
    assert all(url in text and f'href="{url}"' in markup for url in urls)
    assert text.index(site.url("/one")) < text.index(urls[2]) < text.index(site.url("/two")) < text.index(urls[4])
    assert set(mail["X-Monitor-Alert-Ids"].split()) == _expected_ids(pipeline)
    alerts = pipeline.cli("alerts", "--json").stdout.splitlines()
    first_seen = min(alert["first_seen"] for alert in map(json.loads, alerts))
    assert smtp.arrived[0] >= first_seen + DIGEST, "sent once the oldest alert had waited the digest period"
    assert len(smtp.messages) == 1


def test_a_notifier_killed_while_sending_a_digest_sends_it_again_whole(pipeline, site, receivers):
    smtp = receivers(SmtpReceiver, stall=True)
    target = f"smtp://127.0.0.1:{smtp.port}?to=desk@news.example"
    assert pipeline.cli("sink", "add", "email", target, "--name", "digest", "--digest", "1s").returncode == 0
    notifier = pipeline.notifier()
    urls = _two_pages_with_news(pipeline, site)

    wait_for(lambda: smtp.messages, timeout=30, message="the digest at the server, not yet answered")
    notifier.kill()  # mid-send: the server has the mail, the notifier never heard it was taken
    smtp.answer.set()
    assert _sinks(pipeline)["digest"]["pending"] == 5, "nothing recorded as delivered"
    pipeline.notifier()
    wait_for(lambda: _sinks(pipeline)["digest"]["delivered"] == 5, timeout=30, message="the digest sent again")
    assert len(smtp.messages) == 2, "at least once: the mail the server had, and the one it answered"
    assert all(mail["Subject"] == "5 new links on 2 pages" for mail in smtp.messages)
    assert all(url in _mail_text(smtp.messages[-1])[0] for url in urls)


def test_a_webhook_down_for_a_while_gets_every_alert_once_and_delays_no_other_sink(pipeline, site, receivers):
    flaky, steady = receivers(), receivers()
    pipeline.configure(sink_retry_first=0.5, sink_retry_max=4.0, sink_max_attempts=1000)
    for name, hook in (("flaky", flaky), ("steady", steady)):
        assert pipeline.cli("sink", "add", "webhook", hook.url, "--name", name).returncode == 0
    pipeline.processor()
    pipeline.notifier()
    pipeline.worker()
    watch_id = _watch(pipeline, site.add_page("/", INITIAL))
    _check(pipeline, watch_id)

    flaky.close()
    for round_ in range(3):  # alerts raised at the start, the middle and near the end of the outage
        for n in range(2):
            site.publish("/", f"/r{round_}-{n}", f"Round {round_} story {n}")
        _check(pipeline, watch_id)
        wait_for(lambda: len(steady.alerts()) == 2 * (round_ + 1), timeout=10,
                 message="the sink that is up served while the other is down")
        wait_for(lambda: (_sinks(pipeline)["flaky"]["failing_since"] or time.time()) <=
                 time.time() - DOWN_FOR * (round_ + 1) / 3, timeout=DOWN_FOR + 30, message="the outage going on")
    down = _sinks(pipeline)["flaky"]
    assert down["delivered"] == 0 and down["pending"] == 6 and "no answer" in down["last_error"]
    flaky.reopen()

    expected = _expected_ids(pipeline)
    wait_for(lambda: {alert["alert_id"] for alert in flaky.alerts()} == expected, timeout=30,
             message="every alert of the outage once the webhook is back")
    assert len(flaky.alerts()) == len(expected) == 6, "each exactly once: a refused connection delivered nothing"
    wait_for(lambda: _sinks(pipeline)["flaky"]["delivered"] == 6, timeout=10, message="recorded")
    assert _sinks(pipeline)["flaky"]["failing_since"] is None
    assert sorted(alert["alert_id"] for alert in steady.alerts()) == sorted(expected)


def test_sinks_and_filters_declared_in_the_file_deliver_hold_back_and_follow_its_edits(pipeline, site, receivers):
    first, second = receivers(), receivers()
    pipeline.configure(**FAST_RETRIES)
    settings = (pipeline.home / "monitor.toml").read_text()

    def declare(hook) -> None:
        (pipeline.home / "monitor.toml").write_text(
            settings + f'[sinks.team]\nkind = "webhook"\ntarget = "{hook.url}"\ntag = "news"\n'
            '[[filters]]\nrule = "exclude"\npattern = "sponsored"\ntag = "news"\n')

    declare(first)
    pipeline.notifier()
    wait_for(lambda: pipeline.store.declared_filter_ids() and "team" in pipeline.store.sink_names(), timeout=30,
             message="the notifier applying the file at start")
    pipeline.processor()
    pipeline.worker()
    watch_id = _watch(pipeline, site.add_page("/", INITIAL), tag="news")
    _check(pipeline, watch_id)
    site.publish("/", "/news", "Real news")
    site.publish("/", "/ad", "Sponsored: a holiday")
    _check(pipeline, watch_id)

    wait_for(lambda: first.alerts(), timeout=30, message="the alert at the declared webhook")
    assert [alert["url"] for alert in first.alerts()] == [site.url("/news")]
    assert [alert["url"] for alert in pipeline.alert_lines()] == [site.url("/news")], "the filter held the ad back"
    assert site.url("/ad") in pipeline.cli("links", str(watch_id)).stdout, "and it is recorded as known"
    removed = pipeline.cli("sink", "remove", "team")
    assert removed.returncode == 2 and "declared in" in removed.stderr and "remove it there" in removed.stderr

    declare(second)  # the same sink, another target: the running notifier follows the edit
    wait_for(lambda: _sinks(pipeline)["team"]["target"] == f"{second.url.rsplit('/', 1)[0]}/***", timeout=10,
             message="the edit applied")
    site.publish("/", "/more", "More news")
    _check(pipeline, watch_id)
    wait_for(lambda: second.alerts(), timeout=30, message="the alert at the new target")
    assert [alert["url"] for alert in second.alerts()] == [site.url("/more")] and len(first.alerts()) == 1
    wait_for(lambda: _sinks(pipeline)["team"]["delivered"] == 2, timeout=10, message="the history kept")

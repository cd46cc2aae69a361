"""When a link is news and when a page is: reappearance, broken watches and doubtful first
checks, through a real broker, worker and processor and a real local origin."""
from __future__ import annotations

import json
import time

from monitor.codes import shorten
from monitor.linkindex import alert_id
from tests.helpers import wait_for
from tests.integration.test_pipeline import INITIAL, _add_watch, _wait_checks_now


def _alerts(pipeline) -> list[tuple[str, str]]:
    return [(alert["url"], alert["text"]) for alert in pipeline.alert_lines()]


def _watching(pipeline, site, links: list[tuple[str, str]], **settings) -> tuple[str, int]:
    """A page with ``links`` watched by a processor and a worker set up with ``settings``,
    checked when the test says (its URL and watch id)."""
    pipeline.configure(**settings)
    url = site.add_page("/", links)
    watch_id = _add_watch(pipeline, url, "1h")
    pipeline.processor()
    pipeline.worker()
    return url, watch_id


def _keep_checking(pipeline, watch_id: int, seconds: float, message: str) -> None:
    """Check the watch again and again for ``seconds``."""
    start = time.time()
    wait_for(lambda: (_wait_checks_now(pipeline, watch_id), time.time() - start > seconds)[1], timeout=30,
             message=message)


def test_a_link_back_within_renotify_after_is_old_news_and_after_it_is_new(pipeline, site):
    _url, watch_id = _watching(pipeline, site, INITIAL, renotify_after=3)
    _wait_checks_now(pipeline, watch_id)  # the baseline
    site.add_page("/", INITIAL[:1])  # /b and /c leave the page
    _wait_checks_now(pipeline, watch_id)
    site.add_page("/", INITIAL[:2])  # /b is back at once
    _wait_checks_now(pipeline, watch_id)
    assert pipeline.alert_lines() == []

    _keep_checking(pipeline, watch_id, 4, "/c gone for longer than renotify_after, checked all along")
    site.add_page("/", INITIAL)
    _wait_checks_now(pipeline, watch_id)
    assert _alerts(pipeline) == [(site.url("/c"), "Third story")]
    [alert] = pipeline.alert_lines()
    assert alert["alert_id"] != alert_id(watch_id, shorten(site.url("/c")), 0), "not the id a first sight has"


def test_a_broken_watch_sends_one_alert_and_one_when_it_recovers(pipeline, site):
    url, watch_id = _watching(pipeline, site, INITIAL, broken_after=2)
    _wait_checks_now(pipeline, watch_id)
    del site.pages["/"]  # 404 from now on
    _keep_checking(pipeline, watch_id, 3, "the watch failing for longer than broken_after")
    _wait_checks_now(pipeline, watch_id)
    [(page, text)] = _alerts(pipeline)
    assert page == url and text.startswith("watch failing for ") and "404" in text, text

    site.add_page("/", INITIAL)
    _wait_checks_now(pipeline, watch_id)
    _wait_checks_now(pipeline, watch_id)
    [_, (page, text)] = _alerts(pipeline)
    assert page == url and text.startswith("watch recovered after failing for "), text
    assert pipeline.watch(watch_id).last_status == "ok"


def test_a_consent_wall_first_is_not_the_baseline(pipeline, site):
    _url, watch_id = _watching(pipeline, site, [("/consent", "Accept all"), ("/privacy", "Privacy")],
                               baseline_min_links=5)
    _wait_checks_now(pipeline, watch_id)
    assert "not taken as the baseline yet" in pipeline.watch(watch_id).last_status
    stories = [(f"/story/{n}", f"Story {n}") for n in range(30)]
    site.add_page("/", stories)  # the real page: the baseline
    _wait_checks_now(pipeline, watch_id)
    site.publish("/", "/scoop", "A scoop")
    _wait_checks_now(pipeline, watch_id)
    assert _alerts(pipeline) == [(site.url("/scoop"), "A scoop")], "no 'layout changed', no story alerted"


def test_links_with_a_per_request_parameter_alert_nothing_after_the_baseline(pipeline, site):
    def page(session: int, stories: int = 6) -> list[tuple[str, str]]:
        return [(f"/story/{n}?PHPSESSID={session:08x}", f"Story {n}") for n in range(stories)]
    _url, watch_id = _watching(pipeline, site, page(0))
    for session in range(1, 4):
        site.add_page("/", page(session))
        _wait_checks_now(pipeline, watch_id)
    assert pipeline.alert_lines() == []
    site.add_page("/", page(7, stories=7))
    _wait_checks_now(pipeline, watch_id)
    assert _alerts(pipeline) == [(site.url("/story/6"), "Story 6")]
    listed = json.loads(pipeline.cli("watch", "list", "--json").stdout.splitlines()[0])
    assert listed["volatile_params"] == ["phpsessid"]

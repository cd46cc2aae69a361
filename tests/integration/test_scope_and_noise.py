"""A watch's CSS selector region and the noise rule, through the real pipeline: the CLI,
the scheduler building jobs, a RabbitMQ node, a worker, the processor, a local origin."""
from __future__ import annotations

import html
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers import send, wait_for


class RegionSite:
    """A homepage at ``/`` with links in its navigation, main column, aside ``#latest`` and
    footer; :meth:`publish` adds one at the top of a region."""

    def __init__(self) -> None:
        self.regions = {"nav": [("/home", "Home"), ("/sport", "Sport")],
                        "main": [("/main-1", "Main one"), ("/main-2", "Main two"), ("/main-3", "Main three")],
                        "aside": [("/latest-1", "Latest one"), ("/latest-2", "Latest two"), ("/latest-3", "Latest 3")],
                        "footer": [("/imprint", "Imprint")]}
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                send(self, site.page().encode(), "text/html; charset=utf-8")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def page(self) -> str:
        with self.lock:
            parts = {name: "".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a> ' for href, text in links)
                     for name, links in self.regions.items()}
        return (f"<!doctype html><title>News</title><nav>{parts['nav']}</nav><main><h1>Top</h1>{parts['main']}</main>"
                f"<aside id=latest><ul><li>{parts['aside']}</ul></aside><footer>{parts['footer']}</footer>")

    def publish(self, region: str, href: str, text: str) -> None:
        with self.lock:
            self.regions[region].insert(0, (href, text))

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def region_site():
    origin = RegionSite()
    yield origin
    origin.stop()


def checked_again(pipeline, watch_id: int, times: int = 2) -> None:
    """Wait until the scheduler has had the watch checked ``times`` more times."""
    for _ in range(times):
        before = pipeline.checks_done(watch_id)
        wait_for(lambda: pipeline.checks_done(watch_id) > before, timeout=30, message="another check of the watch")


def alerted(pipeline) -> list[str]:
    return [alert["url"] for alert in pipeline.alert_lines()]


def known(pipeline, watch_id: int) -> set[str]:
    return {link.url for link in pipeline.store.links(watch_id)}


def test_only_links_inside_the_selector_region_are_watched(pipeline, region_site):
    site = region_site
    refused = pipeline.cli("watch", "add", site.url, "--selector", "main[")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--selector: bad selector 'main['" in refused.stderr and pipeline.store.list_watches() == []
    tried = pipeline.cli("check", site.url, "--selector", "#latest")
    assert tried.returncode == 0 and [line.split()[0] for line in tried.stdout.splitlines()] == \
        [site.url + path for path in ("latest-1", "latest-2", "latest-3")], tried.stdout
    nothing = pipeline.cli("check", site.url, "--selector", "article")
    assert nothing.returncode == 1 and "selector 'article' matched nothing on the page" in nothing.stderr

    pipeline.configure(politeness_delay=0.0)
    pipeline.scheduler()
    pipeline.processor()
    pipeline.worker()
    added = pipeline.cli("watch", "add", site.url, "--interval", "1s", "--selector", "main, #latest")
    assert added.returncode == 0 and "only links inside 'main, #latest'" in added.stdout, added.stderr
    watch_id = int(re.search(r"added watch (\d+)", added.stdout).group(1))
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the baseline")
    assert known(pipeline, watch_id) == {site.url + path for path in ("main-1", "main-2", "main-3", "latest-1",
                                                                      "latest-2", "latest-3")}

    site.publish("nav", "/nav-new", "New in the menu")
    site.publish("footer", "/footer-new", "New in the footer")
    site.publish("main", "/main-new", "A new main story")
    site.publish("aside", "/latest-new", "A new latest story")
    wait_for(lambda: len(alerted(pipeline)) >= 2, timeout=60, message="the region's two new links alerted")
    checked_again(pipeline, watch_id)
    assert sorted(alerted(pipeline)) == [site.url + "latest-new", site.url + "main-new"]
    assert not {site.url + "nav-new", site.url + "footer-new"} & known(pipeline, watch_id), \
        "links outside the region are not even recorded"

    assert pipeline.cli("watch", "set", str(watch_id), "--selector", "#gone").returncode == 0
    wait_for(lambda: pipeline.watch(watch_id).last_status == "error: selector '#gone' matched nothing on the page",
             timeout=60, message="the check saying the selector matched nothing")
    assert "selector '#gone' matched nothing" in pipeline.cli("watch", "list").stdout

    cleared = pipeline.cli("watch", "set", str(watch_id), "--selector", "")
    assert cleared.returncode == 0 and "every link of the page" in cleared.stdout, cleared.stderr
    wait_for(lambda: site.url + "nav-new" in known(pipeline, watch_id), timeout=60,
             message="the whole page's links recorded once the selector is cleared")
    assert pipeline.watch(watch_id).last_status == "ok"
    assert len(alerted(pipeline)) == 2, "the links that were outside the region are adopted without alerts"
    site.publish("nav", "/nav-newer", "Newer in the menu")
    wait_for(lambda: site.url + "nav-newer" in alerted(pipeline), timeout=60, message="a new menu link alerted")
    assert len(alerted(pipeline)) == 3


def test_a_noise_rule_records_pointless_links_without_alerting_them(pipeline, site):
    url = site.add_page("/", [(f"/story-{n}", f"Story number {n}") for n in range(6)])
    pipeline.configure(politeness_delay=0.0)
    pipeline.scheduler()
    pipeline.processor()
    pipeline.worker()
    watch_id = int(re.search(r"added watch (\d+)",
                             pipeline.cli("watch", "add", url, "--interval", "1s").stdout).group(1))
    rule = pipeline.cli("filter", "add", "noise", "--watch", str(watch_id))
    assert rule.returncode == 0 and "added filter" in rule.stdout, rule.stderr
    wait_for(lambda: pipeline.watch(watch_id).last_status == "ok", timeout=60, message="the baseline")

    site.publish("/", "/story-6", "Read more »")
    site.publish("/", "/menu", "→")
    site.publish("/", "/floods", "Floods in the north")
    wait_for(lambda: alerted(pipeline), timeout=60, message="the real headline alerted")
    checked_again(pipeline, watch_id)
    assert alerted(pipeline) == [site.url("/floods")]
    assert {site.url("/story-6"), site.url("/menu")} <= known(pipeline, watch_id), "held back, still recorded"

    check = pipeline.cli("check", url)
    assert check.returncode == 0, check.stderr
    assert f"dropped (noise: generic text 'Read more »'): {site.url('/story-6')}" in check.stdout.splitlines()
    assert f"dropped (noise: no words in its text '→'): {site.url('/menu')}" in check.stdout.splitlines()
    assert f"{site.url('/floods')}  Floods in the north" in check.stdout.splitlines()
    assert "a noise rule would drop 2" in check.stderr

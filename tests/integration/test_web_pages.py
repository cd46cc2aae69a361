"""The dashboard pages: in a real headless Chromium (Debian's, driven by Selenium through
Debian's chromedriver: nothing downloaded) against the real web process and pipeline, and
through a plain HTTP client for what a browser would never send (a form without its CSRF
field)."""
from __future__ import annotations

import http.cookiejar
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.support.ui import Select, WebDriverWait

from monitor import amqp
from tests.helpers import wait_for

INITIAL = [("/a", "First story"), ("/b", "Second story"), ("/c", "Third story")]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


# --- the browser --------------------------------------------------------------------------------
@pytest.fixture
def screenshots(tmp_path) -> Path:
    """Where the screenshots of the pages go: $MONITOR_TEST_ARTIFACTS or the test's tmp_path."""
    directory = Path(os.environ.get("MONITOR_TEST_ARTIFACTS") or tmp_path) / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    print(f"screenshots of the dashboard: {directory}")
    return directory


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium with a fresh profile and nothing that phones home (this machine
    refuses any connection off loopback, and the tests must not depend on one)."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1200,900", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _submit(driver, button) -> None:
    """Click a form's button and wait until the page it leads to (after the redirect) has
    loaded: the old page carries a marker the new one does not. (While the browser is between
    pages, the driver's calls may fail: those failures only mean "not yet".)"""
    driver.execute_script("window.beforeSubmit = true;")
    button.click()
    WebDriverWait(driver, 30, poll_frequency=0.1, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script("return !window.beforeSubmit && document.readyState === 'complete';"))


def _shoot(driver, directory: Path, name: str) -> None:
    assert driver.save_screenshot(str(directory / f"{name}.png")), f"screenshot {name}"


def test_add_a_watch_see_its_baseline_then_the_new_link_arrives_live(pipeline, site, browser, screenshots):
    url = site.add_page("/", INITIAL)
    pipeline.scheduler()
    pipeline.processor()
    pipeline.worker()
    pipeline.web()
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)

    # Add the watch through the form (an hour apart: the checks are the ones the test asks for).
    browser.get(pipeline.web_url + "watches")
    _shoot(browser, screenshots, "1-watches-empty")
    form = browser.find_element(By.ID, "add-watch")
    form.find_element(By.NAME, "url").send_keys(url)
    form.find_element(By.NAME, "interval").send_keys("1h")
    form.find_element(By.NAME, "name").send_keys("Local news")
    form.find_element(By.NAME, "tag").send_keys("news")
    _submit(browser, form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    assert re.search(r"/watches/(\d+)$", browser.current_url), browser.current_url
    watch_id = int(re.search(r"/watches/(\d+)$", browser.current_url).group(1))
    assert pipeline.watch(watch_id).url == url and pipeline.watch(watch_id).tag == "news"

    # "Recheck now" makes it due at once; its page shows the baseline once the pipeline has it.
    watch_page = browser.current_url
    _submit(browser, browser.find_element(By.CSS_SELECTOR, "button.recheck"))
    assert browser.current_url == watch_page, "back to the watch's page after the recheck"

    def baseline_shown(driver) -> bool:
        driver.get(watch_page)  # (a plain page: loading it again is how it updates)
        return (driver.find_element(By.ID, "status").text == "ok"
                and len(driver.find_elements(By.CSS_SELECTOR, "#links tbody tr")) == len(INITIAL))
    wait.until(baseline_shown)
    links = browser.find_element(By.ID, "links").text
    assert all(text in links for _, text in INITIAL)
    assert browser.find_element(By.ID, "feed").get_attribute("href").endswith(f"/feeds/watch-{watch_id}.atom")
    _shoot(browser, screenshots, "2-watch-baseline")

    browser.get(pipeline.web_url + "watches")
    row = browser.find_element(By.ID, f"watch-{watch_id}")
    assert "ok" in row.find_element(By.CSS_SELECTOR, ".status").text
    assert row.find_element(By.CSS_SELECTOR, ".links-known").text == str(len(INITIAL))
    _shoot(browser, screenshots, "3-watches")

    # The alerts page, then a new link on the origin and a check: its row appears on top
    # while the page stays the same page (the marker set after loading survives).
    browser.get(pipeline.web_url)
    assert browser.find_elements(By.CSS_SELECTOR, "#alerts tbody tr") == [], "the baseline must not alert"
    browser.execute_script("window.notReloaded = 'the same page';")
    site.publish("/", "/new-1", "Breaking: one")
    pipeline.publish_job(watch_id)
    first = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#alerts tbody tr"))[0]
    assert "Breaking: one" in first.text and "Local news" in first.text
    assert first.find_element(By.CSS_SELECTOR, "a").get_attribute("href") == site.url("/new-1")
    assert browser.execute_script("return window.notReloaded;") == "the same page", "the page was reloaded"
    _shoot(browser, screenshots, "4-alerts-live")

    browser.get(pipeline.web_url + f"alerts?watch={watch_id}&tag=news")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#alerts tbody tr")) == 1
    browser.get(pipeline.web_url + "alerts?tag=sports")
    assert browser.find_elements(By.CSS_SELECTOR, "#alerts tbody tr") == []

    # The fleet: the worker alive, and a job that is not one (the worker refuses it to the
    # dead-letter queue) counted among the dead letters.
    amqp.publish(pipeline.channel(), amqp.JOB_QUEUE, b"not a job")

    def fleet_shown(driver) -> bool:
        driver.get(pipeline.web_url + "fleet")  # (a plain page: loading it again is how it updates)
        return (any("alive" in row.text for row in driver.find_elements(By.CSS_SELECTOR, "#workers tbody tr"))
                and driver.find_element(By.CSS_SELECTOR, f"#queue-{amqp.DEAD_LETTER} .ready").text == "1")
    wait.until(fleet_shown)
    assert browser.find_elements(By.ID, "broker-error") == []
    _shoot(browser, screenshots, "5-fleet")
    assert len(list(screenshots.glob("*.png"))) == 5


def test_the_dashboard_is_readable_on_a_phone(pipeline, browser, screenshots):
    """A phone's width: every page fits without scrolling sideways (the tables become cards)."""
    pipeline.store.add_watch("http://127.0.0.1:9/a-rather-long-path/of/a/homepage/index.html", 3600, "A site", "news")
    pipeline.store.add_proxy("http://user:s3cret@127.0.0.1:3128")
    pipeline.store.disable_host("blocked.example", time.time(), 7200, 7200, "HTTP 403 through every exit", "direct", "w1")
    pipeline.web()
    browser.set_window_size(390, 844)
    for page, name in (("watches", "watches"), ("watches/1", "watch"), ("", "alerts"), ("fleet", "fleet")):
        browser.get(pipeline.web_url + page)
        assert browser.find_element(By.CSS_SELECTOR, "meta[name=viewport]")
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1;"), page
        _shoot(browser, screenshots, f"phone-{name}")
    # (The last page, the fleet: a proxy's password masked as the CLI masks it, a cooldown's time left.)
    assert "s3cret" not in browser.page_source and "http://user:***@127.0.0.1:3128" in browser.page_source
    assert "120 min" in browser.find_element(By.ID, "cooldowns").text


# --- without a browser ----------------------------------------------------------------------------
class _Client:
    """A plain HTTP client that keeps cookies, as a browser would, and follows redirects."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def request(self, path: str, form: dict | None = None) -> tuple[int, str]:
        data = None if form is None else urllib.parse.urlencode(form).encode()
        try:
            with self.opener.open(self.base + path, data=data, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def csrf(self, path: str = "watches") -> str:
        status, body = self.request(path)
        assert status == 200
        return re.search(r'name="csrf" value="([^"]+)"', body).group(1)


def _error_line(body: str) -> str:
    return re.search(r'<p class="error"[^>]*>(.*?)</p>', body, re.S).group(1)


def test_a_form_without_its_csrf_field_is_refused_and_changes_nothing(pipeline):
    pipeline.web()
    client = _Client(pipeline.web_url)
    token = client.csrf()  # (the cookie is set now: only the field is missing below)
    watch_id = pipeline.store.add_watch("http://127.0.0.1:9/", 3600).id

    for path, form in (("watches", {"url": "http://127.0.0.1:8/", "interval": "5m"}),
                       (f"watches/{watch_id}/pause", {}), (f"watches/{watch_id}/remove", {}),
                       (f"watches/{watch_id}/interval", {"interval": "5m"}),
                       (f"watches/{watch_id}/filters", {"rule": "noise"})):
        status, body = client.request(path, form)
        assert status == 403 and "out of date or not from this site" in body, path
        status, _ = client.request(path, {**form, "csrf": token + "x"})
        assert status == 403, path
    assert [(w.id, w.enabled, w.interval_s) for w in pipeline.store.list_watches()] == [(watch_id, True, 3600)]
    assert pipeline.store.list_filters() == []

    # With the field, the same form works (and redirects to a page, not to a blank POST answer).
    status, body = client.request(f"watches/{watch_id}/pause", {"csrf": token, "back": "list"})
    assert status == 200 and f'id="watch-{watch_id}"' in body
    assert pipeline.watch(watch_id).enabled is False


def test_bad_input_in_a_form_shows_the_cli_s_one_line_error_and_changes_nothing(pipeline):
    pipeline.web()
    client = _Client(pipeline.web_url)
    token = client.csrf()

    status, body = client.request("watches", {"csrf": token, "url": "not a url", "interval": "5m", "name": "Mine"})
    assert status == 400
    assert _error_line(body) == "&#39;not a url&#39; is not a web address: write it as https://host/path"
    assert 'value="not a url"' in body and 'value="Mine"' in body, "what was typed is kept for correcting"
    cli = pipeline.cli("watch", "add", "not a url", "--interval", "5m")
    assert cli.returncode == 2 and "is not a web address: write it as https://host/path" in cli.stderr

    status, body = client.request("watches", {"csrf": token, "url": "http://127.0.0.1:9/", "interval": "5 parsecs"})
    assert status == 400 and _error_line(body).startswith("bad interval")
    assert pipeline.store.list_watches() == []

    watch_id = pipeline.store.add_watch("http://127.0.0.1:9/", 3600).id
    status, body = client.request("watches", {"csrf": token, "url": "http://127.0.0.1:9/"})
    assert status == 400 and "is already watched" in _error_line(body)
    status, body = client.request(f"watches/{watch_id}/interval", {"csrf": token, "interval": "0s"})
    assert status == 400 and _error_line(body).startswith("bad interval")
    assert [(w.id, w.interval_s) for w in pipeline.store.list_watches()] == [(watch_id, 3600)]

    # The good input after the bad: added, and the browser is sent to the new watch's page.
    status, body = client.request("watches", {"csrf": token, "url": "http://127.0.0.1:8/", "interval": "10m"})
    assert status == 200 and "Watch 2:" in body
    assert pipeline.store.get_watch(2).interval_s == 600


def test_the_name_and_tag_form_renames_clears_and_refuses_a_bad_value(pipeline):
    pipeline.web()
    client = _Client(pipeline.web_url)
    token = client.csrf()
    watch_id = pipeline.store.add_watch("http://127.0.0.1:9/", 3600, "Old", "old").id
    path = f"watches/{watch_id}/label"
    status, body = client.request(f"watches/{watch_id}")
    assert status == 200 and f'action="/{path}"' in body and 'name="name" value="Old"' in body

    # From the watch's page: back to it, renamed.
    status, body = client.request(path, {"csrf": token, "back": "watch", "name": " Local news ", "tag": "local"})
    assert status == 200 and f"Watch {watch_id}: Local news" in body
    assert (pipeline.watch(watch_id).name, pipeline.watch(watch_id).tag) == ("Local news", "local")

    # Too long, or two lines: the CLI's one-line error on the page it came from, nothing changed.
    for form, reason in (({"name": "x" * 201, "tag": ""}, "name: at most 200 characters (got 201)"),
                         ({"name": "ok", "tag": "a\nb"}, "tag: one line")):
        for back, marker in (("list", 'id="add-watch"'), ("watch", f"Watch {watch_id}: Local news")):
            status, body = client.request(path, {"csrf": token, "back": back, **form})
            assert status == 400 and _error_line(body).startswith(reason) and marker in body, (form, back)
    assert (pipeline.watch(watch_id).name, pipeline.watch(watch_id).tag) == ("Local news", "local")

    # From the list, blank fields clear both.
    status, body = client.request(path, {"csrf": token, "back": "list", "name": "", "tag": ""})
    assert status == 200 and f'id="watch-{watch_id}"' in body
    assert (pipeline.watch(watch_id).name, pipeline.watch(watch_id).tag) == (None, None)


def test_the_watch_page_lists_the_filters_that_apply_and_adds_and_removes_its_own(pipeline, browser, screenshots):
    now = time.time()
    watch_id = pipeline.store.add_watch("http://127.0.0.1:9/", 3600, "Local news", "news").id
    other_id = pipeline.store.add_watch("http://127.0.0.1:8/", 3600).id
    inherited = {pipeline.store.add_filter("noise", "", None, "news", now): "tag 'news'",
                 pipeline.store.add_filter("same-site", "", None, None, now): "every watch"}
    not_its_own = pipeline.store.add_filter("exclude", "sponsored", other_id, None, now)
    pipeline.web()
    page = pipeline.web_url + f"watches/{watch_id}"
    browser.get(page)

    def rows() -> dict[int, str]:
        return {int(row.get_attribute("id").removeprefix("filter-")): row.text
                for row in browser.find_elements(By.CSS_SELECTOR, "#filter-rules tbody tr")}
    shown = rows()
    assert set(shown) == set(inherited), "its tag's and every watch's, not another watch's"
    assert all(shown[rule_id].endswith(whose) for rule_id, whose in inherited.items()), shown
    assert browser.find_elements(By.CSS_SELECTOR, "#filter-rules button") == [], "only its own can be removed here"

    # A bad pattern: the CLI's one-line error, what was typed kept, nothing added.
    form = browser.find_element(By.ID, "add-filter")
    Select(form.find_element(By.NAME, "rule")).select_by_visible_text("include")
    form.find_element(By.NAME, "pattern").send_keys("/[unclosed/")
    _submit(browser, form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    assert browser.find_element(By.CSS_SELECTOR, "p.error").text.startswith("include: bad regular expression")
    assert browser.find_element(By.CSS_SELECTOR, "#add-filter [name=pattern]").get_attribute("value") == "/[unclosed/"
    assert len(pipeline.store.list_filters()) == 3

    pattern = browser.find_element(By.CSS_SELECTOR, "#add-filter [name=pattern]")
    pattern.clear()
    pattern.send_keys("election")
    _submit(browser, browser.find_element(By.CSS_SELECTOR, "#add-filter button[type=submit]"))
    assert browser.current_url == page + "#filters"
    [own] = [rule for rule in pipeline.store.list_filters() if rule.watch_id == watch_id]
    assert (own.rule, own.pattern) == ("include", "election")
    assert rows()[own.id].split() == [str(own.id), "include", "election", "watch", str(watch_id), "Remove"]
    _shoot(browser, screenshots, "watch-filters")

    _submit(browser, browser.find_element(By.CSS_SELECTOR, f"#filter-{own.id} button.remove"))
    assert set(rows()) == set(inherited)
    assert sorted(rule.id for rule in pipeline.store.list_filters()) == sorted([*inherited, not_its_own])

    # Without a browser: another watch's rule is not removed through this page.
    client = _Client(pipeline.web_url)
    status, _ = client.request(f"watches/{watch_id}/filters/{not_its_own}/remove", {"csrf": client.csrf()})
    assert status == 404 and len(pipeline.store.list_filters()) == 3


def _dead_letters(pipeline) -> list[dict]:
    return [json.loads(line) for line in pipeline.cli("dlq", "list", "--json").stdout.splitlines()]


def test_the_fleet_page_replays_the_dead_letters(pipeline):
    pipeline.worker()
    pipeline.web()
    client = _Client(pipeline.web_url)
    token = client.csrf("fleet")
    assert 'id="replay-dead-letters"' in client.request("fleet")[1]

    status, body = client.request("fleet/replay", {"csrf": token})
    assert status == 200 and "Replayed 0 dead letter(s)" in body, "nothing to replay is said too"

    # A job the worker cannot read ends in dead_letter; the button sends it back (where the
    # worker refuses it again), as `monitor dlq replay --all` and the API's replay do.
    amqp.publish(pipeline.channel(), amqp.JOB_QUEUE, b"not json")
    amqp.publish(pipeline.channel(), amqp.JOB_QUEUE, b'{"baseUrl": 7}')
    letters = wait_for(lambda: len(found := _dead_letters(pipeline)) == 2 and found, timeout=30,
                       message="the dead letters")
    listed = client.request("fleet")[1].split('id="dead-letters"')[1].split("</table>")[0]
    assert all(letter["id"] in listed for letter in letters) and "not json" in listed

    # One letter's own button replays it alone; the other stays listed.
    status, body = client.request("fleet/replay", {"csrf": token, "id": letters[0]["id"]})
    assert status == 200 and "Replayed 1 dead letter(s)" in body
    wait_for(lambda: len(_dead_letters(pipeline)) == 2, timeout=30, message="the replayed letter refused again")
    status, body = client.request("fleet/replay", {"csrf": token})
    assert status == 200 and "Replayed 2 dead letter(s)" in body, "the replayed one died again, beside the other"
    assert client.request("fleet/replay", {})[0] == 403, "not without the form's csrf field"


def test_the_fleet_page_lifts_a_hosts_cooldown_as_the_cli_does(pipeline):
    now = time.time()
    pipeline.store.disable_host("blocked.example", now, 7200, 7200, "HTTP 403 through every exit", "direct", "w1")
    worker = pipeline.worker()
    pipeline.web()
    client = _Client(pipeline.web_url)
    token = client.csrf("fleet")
    assert 'action="/fleet/hosts/blocked.example/enable"' in client.request("fleet")[1]

    status, body = client.request("fleet/hosts/blocked.example/enable", {"csrf": token})
    assert status == 200 and "blocked.example enabled" in body and 'id="cooldowns"' not in body
    assert pipeline.store.host_cooldowns(time.time()) == []
    wait_for(lambda: "host enabled again" in worker.log_text(), timeout=30, message="the running worker told")
    status, body = client.request("fleet/hosts/blocked.example/enable", {"csrf": token})
    assert status == 404 and _error_line(body) == "blocked.example is not disabled (`monitor hosts` lists those that are)"

"""The REST API (/api/v1) through a real HTTP client against the real web process, with the
real store, broker and pipeline processes where a test needs them."""
from __future__ import annotations

import json
import time

import requests

from monitor import amqp
from tests.helpers import wait_for

INITIAL = [("/a", "First story"), ("/b", "Second story")]


class Api:
    """A client of one web front's /api/v1 (with its token, if any)."""

    def __init__(self, base: str, token: str | None = None) -> None:
        self.base = base + "api/v1"
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def call(self, method: str, path: str, body=None, raw: bytes | None = None, **params) -> requests.Response:
        return self.session.request(method, self.base + path, json=body, data=raw, params=params, timeout=15)

    def ok(self, method: str, path: str, body=None, expected: int = 200, **params):
        response = self.call(method, path, body, **params)
        assert response.status_code == expected, response.text
        return response.json()

    def refused(self, status: int, method: str, path: str, body=None, raw: bytes | None = None, **params) -> str:
        """The one-line error of a request refused with ``status``."""
        response = self.call(method, path, body, raw, **params)
        assert response.status_code == status, (method, path, body, raw, response.status_code, response.text)
        error = response.json()["error"]
        assert error and "\n" not in error
        return error


def test_a_watch_added_by_post_is_checked_by_the_pipeline_and_its_links_and_alerts_served(pipeline, site):
    url = site.add_page("/", INITIAL)
    pipeline.scheduler()
    pipeline.processor()
    pipeline.worker()
    pipeline.web()
    api = Api(pipeline.web_url)

    watch = api.ok("POST", "/watches", {"url": url, "interval": "1h", "name": "Local news", "tags": ["news"]},
                   expected=201)
    assert (watch["url"], watch["name"], watch["tag"], watch["interval"], watch["enabled"]) == \
        (url, "Local news", "news", "1h", True)
    assert [w["id"] for w in api.ok("GET", "/watches")] == [watch["id"]]
    path = f"/watches/{watch['id']}"

    # An hour's interval: only "check now" gets it checked within the test.
    assert api.ok("POST", path + "/recheck", expected=202) == {"id": watch["id"], "in_flight": False}
    wait_for(lambda: api.ok("GET", path)["last_status"] == "ok", timeout=60, message="the baseline check")
    links = api.ok("GET", path + "/links")
    assert {link["url"] for link in links} == {site.url(p) for p, _ in INITIAL}
    assert {link["text"] for link in links} == {text for _, text in INITIAL}
    assert len(api.ok("GET", path + "/links", limit="1")) == 1
    assert api.ok("GET", "/alerts") == [], "the baseline does not alert"

    site.publish("/", "/new-1", "Breaking: one")
    api.ok("POST", path + "/recheck", expected=202)
    alerts = wait_for(lambda: api.ok("GET", "/alerts", watch=str(watch["id"])), timeout=60, message="the alert")
    assert [(a["url"], a["text"], a["watch_id"], a["baseUrl"]) for a in alerts] == \
        [(site.url("/new-1"), "Breaking: one", watch["id"], url)]
    assert api.ok("GET", "/alerts", watch=url, since="1h") == alerts, "by URL, and a duration like --since"
    assert api.ok("GET", "/alerts", since=str(int(alerts[0]["first_seen"]) - 1)) == alerts, "a Unix time"
    assert api.ok("GET", "/alerts", since=str(int(time.time()) + 60)) == []
    shown = api.ok("GET", path)
    assert (shown["links_known"], shown["new_links"]) == (3, 1)
    # The API and the CLI show a watch alike.
    assert json.loads(pipeline.cli("watch", "list", "--json").stdout) == shown


def test_bad_input_is_400_with_one_line_and_changes_nothing(pipeline, site):
    url = site.add_page("/", INITIAL)
    pipeline.web()
    api = Api(pipeline.web_url)
    watch = api.ok("POST", "/watches", {"url": url, "interval": 600, "tag": "news"}, expected=201)
    assert watch["interval"] == "10m", "whole seconds are an interval too"
    path = f"/watches/{watch['id']}"
    before = api.ok("GET", "/watches")

    for body in ({"url": "ftp://example.org/"}, {"url": "not a url"}, {"url": 5}, {}, {"interval": "5m"},
                 {"url": site.url("/other"), "interval": "5x"}, {"url": site.url("/other"), "interval": "-5m"},
                 {"url": site.url("/other"), "interval": 0}, {"url": site.url("/other"), "interval": "400d"},
                 {"url": site.url("/other"), "interval": True}, {"url": site.url("/other"), "selector": "[[["},
                 {"url": site.url("/other"), "tags": ["a", "b"]}, {"url": site.url("/other"), "tag": "a", "tags": []},
                 {"url": site.url("/other"), "ignore_params": "sid"}, {"url": site.url("/other"), "colour": "red"},
                 {"url": url}, [url]):
        api.refused(400, "POST", "/watches", body)
    assert "already watched" in api.refused(400, "POST", "/watches", {"url": url})
    assert "bad interval" in api.refused(400, "POST", "/watches", {"url": site.url("/other"), "interval": "5x"})
    assert "JSON object" in api.refused(400, "POST", "/watches", raw=b'{"url": ')

    for body in ({}, {"interval": "5x"}, {"enabled": "yes"}, {"selector": "[[["}, {"ignore_params": ["a=b"]},
                 {"forget_volatile": False}, {"interval": "2h", "enabled": "no"}, {"name": "x" * 201},
                 {"name": "renamed", "tag": "a\nb"}, {"name": 5}, {"tag": ["news"]}, {"nickname": "renamed"}):
        api.refused(400, "PATCH", path, body)
    api.refused(400, "PATCH", path, raw=b"not json")
    assert "bad duration" in api.refused(400, "GET", "/alerts", since="yesterday")
    api.refused(400, "GET", "/alerts", watch="999")
    api.refused(400, "GET", path + "/links", limit="0")
    assert api.ok("GET", "/watches") == before, "nothing changed"

    for method, unknown in (("GET", "/watches/999"), ("PATCH", "/watches/999"), ("DELETE", "/watches/999"),
                            ("POST", "/watches/999/recheck"), ("GET", "/watches/999/links"),
                            ("GET", "/watches/99999999999999999999999"), ("GET", "/no-such-thing")):
        api.refused(404, method, unknown, {"interval": "1h"} if method == "PATCH" else None)
    assert api.ok("GET", "/watches") == before

    changed = api.ok("PATCH", path, {"interval": "2h", "enabled": False, "ignore_params": ["SID"]})
    assert (changed["interval"], changed["enabled"], changed["ignore_params"]) == ("2h", False, ["sid"])
    assert api.ok("PATCH", path, {"enabled": True})["enabled"] is True
    renamed = api.ok("PATCH", path, {"name": "Local news", "tag": "local"})
    assert (renamed["name"], renamed["tag"], renamed["interval"]) == ("Local news", "local", "2h")
    assert "at most 200 characters" in api.refused(400, "PATCH", path, {"name": "x" * 201, "tag": ""})
    assert api.ok("GET", path)["tag"] == "local", "a refused change changes nothing"
    cleared = api.ok("PATCH", path, {"tag": "", "name": None})
    assert (cleared["name"], cleared["tag"]) == ("Local news", None), "'' clears, null leaves as it is"
    assert api.ok("DELETE", path) == {"removed": watch["id"]}
    api.refused(404, "GET", path)
    assert api.ok("GET", "/watches") == []


def test_a_watch_password_is_never_shown(pipeline, site):
    secret_url = site.url("/").replace("http://", "http://reader:hunter2@")
    pipeline.web()
    api = Api(pipeline.web_url)
    created = api.call("POST", "/watches", {"url": secret_url, "interval": "1h"})
    assert created.status_code == 201 and "reader:***@" in created.json()["url"]
    duplicate = api.call("POST", "/watches", {"url": secret_url})
    listed = api.call("GET", "/watches")
    for response in (created, duplicate, listed, api.call("GET", f"/watches/{created.json()['id']}")):
        assert "hunter2" not in response.text
    assert pipeline.store.get_watch(created.json()["id"]).url == secret_url, "kept to fetch with, only masked"


def test_the_fleet_and_delivery_lists_mask_their_secrets(pipeline, site):
    pipeline.store.add_proxy("http://exit:pr0xypass@127.0.0.1:3128")
    added = pipeline.cli("sink", "add", "webhook", "https://hooks.example/T0KEN?key=w3bhook", "--name", "hook")
    assert added.returncode == 0, added.stderr
    pipeline.worker()
    pipeline.web()
    api = Api(pipeline.web_url)

    [proxy] = api.ok("GET", "/proxies")
    assert proxy["url"] == "http://exit:***@127.0.0.1:3128"
    [sink] = api.ok("GET", "/sinks")
    assert (sink["name"], sink["kind"]) == ("hook", "webhook")
    assert "T0KEN" not in json.dumps(sink) and "w3bhook" not in json.dumps(sink)
    workers = wait_for(lambda: api.ok("GET", "/workers"), timeout=30, message="the worker's heartbeat")
    assert workers[0]["state"] == "alive"
    assert api.ok("GET", "/hosts") == []

    # A job the worker cannot read ends in dead_letter; replaying it publishes it back.
    assert api.ok("GET", "/dead-letters") == []
    amqp.publish(pipeline.channel(), amqp.JOB_QUEUE, b"not json")
    [letter] = wait_for(lambda: api.ok("GET", "/dead-letters"), timeout=30, message="the dead letter")
    assert (letter["queue"], letter["reason"], letter["body"]) == (amqp.JOB_QUEUE, "rejected", "not json")
    api.refused(400, "POST", "/dead-letters/replay", {})
    api.refused(400, "POST", "/dead-letters/replay", {"ids": [letter["id"]], "all": True})
    assert api.ok("POST", "/dead-letters/replay", {"ids": [letter["id"], "no-such-id"]}) == \
        {"replayed": [letter["id"]], "missing": ["no-such-id"]}


def test_with_a_token_the_api_answers_401_without_it(pipeline):
    pipeline.env["MONITOR_WEB_TOKEN"] = "api-t0ken"
    pipeline.web()
    assert "token is required" in Api(pipeline.web_url).refused(401, "GET", "/watches")
    Api(pipeline.web_url, "wrong").refused(401, "POST", "/watches", {"url": "https://example.org/"})
    assert Api(pipeline.web_url, "api-t0ken").ok("GET", "/watches") == []
    assert pipeline.store.list_watches() == [], "a refused request changes nothing"


def test_the_openapi_document_is_served_by_the_process(pipeline):
    pipeline.web()
    document = Api(pipeline.web_url).ok("GET", "/openapi.json")
    assert document["openapi"].startswith("3.") and "/watches/{watch_id}" in document["paths"]

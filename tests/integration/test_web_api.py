"""The REST API (/api/v1) through a real HTTP client against the real web process, with the
real store, broker and pipeline processes where a test needs them."""
from __future__ import annotations

import json
import time

import requests

from monitor import amqp
from monitor.store import CheckResult, LinkRecord, Store
from tests.fleet import free_port
from tests.helpers import wait_for
from tests.receivers import WebhookReceiver

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
    # Replayed, the worker refuses it again; purging deletes it for good (`monitor dlq purge`).
    wait_for(lambda: api.ok("GET", "/dead-letters"), timeout=30, message="the letter refused again")
    assert api.ok("POST", "/dead-letters/purge") == {"purged": 1}
    assert api.ok("GET", "/dead-letters") == []


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


# --- the write routes of the other commands ------------------------------------------------------
def _alerted(store: Store, watch_id: int, count: int) -> list[str]:
    """Record a check of ``watch_id`` that found ``count`` new links, each alerted (as the
    processor records one); the alert ids, oldest first."""
    now = time.time()
    links = [LinkRecord(f"http://127.0.0.1:9/story-{n}", f"Story {n}", f"code{n:02d}", now + n) for n in range(count)]
    alert_ids = {link.url: f"{watch_id}-{link.code}" for link in links}
    store.record_results([CheckResult(watch_id, now + count, "ok", 200, 10, links, alert_ids)])
    return list(alert_ids.values())


def _declare(pipeline, toml: str) -> None:
    """Add ``toml`` to the home's monitor.toml and apply it as every `monitor filter|sink`
    command does (the web front leaves the file to the notifier)."""
    path = pipeline.home / "monitor.toml"
    path.write_text(path.read_text() + toml)
    assert pipeline.cli("filter", "list").returncode == 0


def test_long_lists_are_paged_by_limit_and_offset_and_bad_values_refused(pipeline):
    watch_ids = [pipeline.store.add_watch(f"http://127.0.0.1:9/{n}", 3600).id for n in range(5)]
    _alerted(pipeline.store, watch_ids[0], 4)
    pipeline.web()
    api = Api(pipeline.web_url)

    assert [w["id"] for w in api.ok("GET", "/watches", limit="2", offset="1")] == watch_ids[1:3]
    assert [w["id"] for w in api.ok("GET", "/watches", offset="4")] == watch_ids[4:]
    assert api.ok("GET", "/watches", offset="5") == [] and len(api.ok("GET", "/watches", limit="9")) == 5
    assert [w["id"] for w in api.ok("GET", "/watches", q=":9/3")] == [watch_ids[3]], "the dashboard's search"
    assert api.ok("GET", "/watches", offset=str(2**63 + 1)) == [], "an offset past any list is an empty page"
    links_path = f"/watches/{watch_ids[0]}/links"
    links, alerts = api.ok("GET", links_path), api.ok("GET", "/alerts")
    assert len(links) == len(alerts) == 4
    assert api.ok("GET", links_path, limit="2", offset="1") == links[1:3]
    assert api.ok("GET", links_path, offset="3") == links[3:]
    assert api.ok("GET", "/alerts", limit="3", offset="2") == alerts[2:]
    assert api.ok("GET", "/alerts", watch=str(watch_ids[0]), limit="1") == alerts[:1]

    for path in ("/watches", "/alerts", links_path, "/alerts/failed"):
        for params in ({"limit": "0"}, {"limit": "-1"}, {"limit": "ten"}, {"offset": "-1"}, {"offset": "1.5"},
                       {"offset": "x", "limit": "1"}):
            error = api.refused(400, "GET", path, **params)
            assert error.startswith(tuple(params)), error


def test_filters_are_added_listed_and_removed_as_by_the_cli(pipeline):
    watch = pipeline.store.add_watch("http://127.0.0.1:9/", 3600, tag="news")
    _declare(pipeline, '[[filters]]\nrule = "noise"\ntag = "news"\n')
    [declared] = pipeline.store.declared_filter_ids()
    pipeline.web()
    api = Api(pipeline.web_url)

    by_id = api.ok("POST", "/filters", {"rule": "include", "pattern": "election", "watch": watch.id}, expected=201)
    assert {k: by_id[k] for k in ("rule", "pattern", "watch_id", "tag", "declared")} == \
        {"rule": "include", "pattern": "election", "watch_id": watch.id, "tag": None, "declared": False}
    by_url = api.ok("POST", "/filters", {"rule": "url-deny", "pattern": "/live/", "watch": watch.url}, expected=201)
    assert by_url["watch_id"] == watch.id
    everywhere = api.ok("POST", "/filters", {"rule": "same-site"}, expected=201)
    assert (everywhere["watch_id"], everywhere["tag"], everywhere["pattern"]) == (None, None, "")
    listed = api.ok("GET", "/filters")
    assert [f["id"] for f in listed] == [declared, by_id["id"], by_url["id"], everywhere["id"]]
    assert listed[0]["declared"] is True
    assert [json.loads(line) for line in pipeline.cli("filter", "list", "--json").stdout.splitlines()] == listed

    for body in ({}, {"rule": "bogus"}, {"rule": "include"}, {"rule": "include", "pattern": "/[unclosed/"},
                 {"rule": "noise", "pattern": "words"}, {"rule": "noise", "watch": 999},
                 {"rule": "noise", "watch": "http://127.0.0.1:8/"}, {"rule": "noise", "watch": watch.id, "tag": "news"},
                 {"rule": "noise", "watch": [watch.id]}, {"rule": 5}, {"rule": "noise", "colour": "red"}, ["noise"]):
        api.refused(400, "POST", "/filters", body)
    assert "unknown rule 'bogus'" in api.refused(400, "POST", "/filters", {"rule": "bogus"})
    assert "declared in" in api.refused(400, "DELETE", f"/filters/{declared}")
    api.refused(404, "DELETE", "/filters/999")
    api.refused(404, "DELETE", "/filters/99999999999999999999999")
    assert api.ok("GET", "/filters") == listed, "nothing changed"

    assert api.ok("DELETE", f"/filters/{by_url['id']}") == {"removed": by_url["id"]}
    api.refused(404, "DELETE", f"/filters/{by_url['id']}")
    assert [f["id"] for f in api.ok("GET", "/filters")] == [declared, by_id["id"], everywhere["id"]]


def test_sinks_are_added_tested_and_removed_with_their_secrets_masked(pipeline):
    hook = WebhookReceiver()
    try:
        _sinks_through_the_api(pipeline, hook)
    finally:
        hook.stop()


def _sinks_through_the_api(pipeline, hook: WebhookReceiver) -> None:
    watch = pipeline.store.add_watch("http://127.0.0.1:9/", 3600, tag="news")
    _declare(pipeline, f'[sinks.declared-hook]\nkind = "webhook"\ntarget = "{hook.url}"\n')
    pipeline.web()
    api = Api(pipeline.web_url)

    added = api.ok("POST", "/sinks", {"kind": "webhook", "target": hook.url + "?token=t0ps3cret", "name": "team",
                                      "secret": "sign-key", "headers": {"X-Team": "news"}, "tag": "news"}, expected=201)
    assert (added["name"], added["kind"], added["tag"], added["declared"]) == ("team", "webhook", "news", False)
    assert "t0ps3cret" not in json.dumps(api.ok("GET", "/sinks")) and "sign-key" not in json.dumps(added)
    mail = api.ok("POST", "/sinks", {"kind": "email", "target": "smtp://127.0.0.1:9?to=a@example.org&from=m@example.org",
                                     "digest": "15m", "watch": watch.id}, expected=201)
    assert (mail["name"], mail["digest"], mail["watch_id"]) == ("email-3", 900, watch.id), "named KIND-N by default"
    before = api.ok("GET", "/sinks")

    for body in ({}, {"kind": "webhook"}, {"kind": "pigeon", "target": "coo"}, {"kind": "webhook", "target": "ftp://x/"},
                 {"kind": "webhook", "target": hook.url, "name": "team"}, {"kind": "webhook", "target": hook.url,
                                                                           "name": "two words"},
                 {"kind": "webhook", "target": hook.url, "headers": ["X-Team: news"]},
                 {"kind": "webhook", "target": hook.url, "headers": {"X Team": "news"}},
                 {"kind": "webhook", "target": hook.url, "digest": "15m"},
                 {"kind": "email", "target": "smtp://127.0.0.1:9?to=a@example.org", "digest": "soon"},
                 {"kind": "webhook", "target": hook.url, "watch": 999},
                 {"kind": "webhook", "target": hook.url, "watch": watch.id, "tag": "news"},
                 {"kind": "webhook", "target": hook.url, "secret": 5}, {"kind": "webhook", "target": hook.url, "to": "x"}):
        api.refused(400, "POST", "/sinks", body)
    assert "exists already" in api.refused(400, "POST", "/sinks", {"kind": "webhook", "target": hook.url, "name": "team"})
    assert "declared in" in api.refused(400, "DELETE", "/sinks/declared-hook")
    for method, path in (("DELETE", "/sinks/nope"), ("POST", "/sinks/nope/test")):
        api.refused(404, method, path)
    assert api.ok("GET", "/sinks") == before, "nothing changed"

    # A test alert, signed and with its header, as `monitor sink test` sends it.
    assert api.ok("POST", "/sinks/team/test") == {"sink": "team", "delivered": True}
    [(headers, body)] = hook.accepted
    assert headers["x-team"] == "news" and headers["x-monitor-signature"].startswith("sha256=")
    assert body["alerts"][0]["url"] == "https://example.org/monitor-test"
    hook.down.set()
    error = api.refused(502, "POST", "/sinks/team/test")
    assert error.startswith("sink team: the test alert failed") and "HTTP 500" in error and "t0ps3cret" not in error

    assert api.ok("DELETE", "/sinks/team") == {"removed": "team"}
    assert [s["name"] for s in api.ok("GET", "/sinks")] == ["declared-hook", "email-3"]


def test_failed_deliveries_are_listed_and_made_pending_again(pipeline):
    watch_id = pipeline.store.add_watch("http://127.0.0.1:9/", 3600).id
    pipeline.store.add_sink("hook", "webhook", "http://127.0.0.1:9/hook", {}, None, None, time.time())
    alert_ids = _alerted(pipeline.store, watch_id, 3)
    pipeline.store.delivery_failed("hook", alert_ids, "HTTP 500", time.time(), 1.0, 1.0, max_attempts=1)
    pipeline.web()
    api = Api(pipeline.web_url)

    failed = api.ok("GET", "/alerts/failed")
    assert [(f["sink"], f["alert_id"], f["last_error"]) for f in failed] == [("hook", a, "HTTP 500") for a in alert_ids]
    assert [json.loads(line) for line in pipeline.cli("alerts", "failed", "--json").stdout.splitlines()] == failed
    assert api.ok("GET", "/alerts/failed", sink="hook", limit="1") == failed[:1]
    assert api.ok("GET", "/alerts/failed", sink="other") == []

    for body in ({}, {"ids": [alert_ids[0]], "all": True}, {"all": True, "sink": "nope"}, {"ids": alert_ids[0]},
                 {"all": "yes"}, {"all": False}, {"all": True, "sinks": "hook"}):
        api.refused(400, "POST", "/alerts/retry", body)
    assert "no sink named 'nope'" in api.refused(400, "POST", "/alerts/retry", {"all": True, "sink": "nope"})
    assert api.ok("GET", "/alerts/failed") == failed, "nothing changed"

    assert api.ok("POST", "/alerts/retry", {"ids": [alert_ids[0]]}) == {"pending_again": 1}
    assert [f["alert_id"] for f in api.ok("GET", "/alerts/failed")] == alert_ids[1:]
    assert api.ok("POST", "/alerts/retry", {"all": True, "sink": "hook"}) == {"pending_again": 2}
    assert api.ok("GET", "/alerts/failed") == []
    assert [s["pending"] for s in api.ok("GET", "/sinks")] == [3]


def test_proxies_are_tried_added_tested_and_removed(pipeline, site, proxies):
    page = site.add_page("/", INITIAL)
    [exit_a] = proxies("exit-a")
    nobody = f"http://user:pr0xypass@127.0.0.1:{free_port()}"  # (no proxy listens there)
    pipeline.web()
    api = Api(pipeline.web_url)

    added = api.ok("POST", "/proxies", {"url": exit_a.url, "page": page}, expected=201)
    assert added["url"] == exit_a.url and "warning" not in added
    tested = api.ok("POST", f"/proxies/{added['id']}/test", {"page": page})
    assert tested["id"] == added["id"] and tested["outcome"].startswith(f"ok through {exit_a.url}: {page} answered")
    before = api.ok("GET", "/proxies")

    for body in ({}, {"url": "ftp://127.0.0.1:21"}, {"url": "http://127.0.0.1"}, {"url": exit_a.url},
                 {"url": nobody, "page": page}, {"url": nobody, "test": "no"}, {"url": nobody, "page": "not a page"},
                 {"url": nobody, "port": 1}):
        error = api.refused(400, "POST", "/proxies", body)
        assert "pr0xypass" not in error
    assert "nothing added" in api.refused(400, "POST", "/proxies", {"url": nobody, "page": page})
    assert "already in the pool" in api.refused(400, "POST", "/proxies", {"url": exit_a.url, "test": False})
    for method, path in (("POST", "/proxies/999/test"), ("DELETE", "/proxies/999")):
        api.refused(404, method, path)
    api.refused(400, "POST", f"/proxies/{added['id']}/test", {"page": "not a page"})
    assert api.ok("GET", "/proxies") == before, "nothing changed"

    # Untested, it is added (password masked); its test is the proxy's failure, a 502.
    untested = api.ok("POST", "/proxies", {"url": nobody, "test": False}, expected=201)
    assert untested["url"] == nobody.replace("pr0xypass", "***")
    error = api.refused(502, "POST", f"/proxies/{untested['id']}/test", {"page": page})
    assert error.startswith("cannot connect to the proxy") and "pr0xypass" not in error
    assert api.ok("DELETE", f"/proxies/{untested['id']}") == {"removed": untested["id"]}
    assert api.ok("GET", "/proxies") == before


def test_enabling_a_disabled_host_lifts_it_in_the_store_and_every_worker(pipeline):
    pipeline.configure(heartbeat_interval=0.5)
    worker = pipeline.worker()
    pipeline.web()
    api = Api(pipeline.web_url)
    wait_for(lambda: api.ok("GET", "/workers"), timeout=30, message="the worker's heartbeat")
    pipeline.store.disable_host("blocked.example", time.time(), 7200, 7200, "HTTP 403 through every exit", "direct", "w1")
    assert [h["host"] for h in api.ok("GET", "/hosts")] == ["blocked.example"]

    api.refused(400, "POST", "/hosts/%20/enable")
    assert "is not disabled" in api.refused(404, "POST", "/hosts/other.example/enable")
    assert api.ok("POST", "/hosts/Blocked.Example./enable") == {"enabled": "blocked.example"}
    assert api.ok("GET", "/hosts") == []
    wait_for(lambda: "host enabled again" in worker.log_text(), timeout=10, message="the worker told of the lift")
    api.refused(404, "POST", "/hosts/blocked.example/enable")


def test_without_a_broker_the_routes_that_need_it_answer_503(pipeline):
    pipeline.use_broker(f"amqp://guest:guest@127.0.0.1:{free_port()}/")
    pipeline.web()
    api = Api(pipeline.web_url)
    pipeline.store.disable_host("blocked.example", time.time(), 7200, 7200, "HTTP 403 through every exit", "direct", "w1")
    assert "cannot reach the broker" in api.refused(503, "POST", "/dead-letters/purge")
    error = api.refused(503, "POST", "/hosts/blocked.example/enable")
    assert error.startswith("blocked.example is off the disable list, but running workers were not told")
    assert api.ok("GET", "/hosts") == [], "lifted in the store all the same, as the CLI does"


def test_the_watch_list_is_exported_and_imported_as_by_the_cli(pipeline, tmp_path):
    pipeline.store.add_watch("http://reader:hunter2@127.0.0.1:9/", 3600, "Nine", "news")
    pipeline.store.add_watch("http://127.0.0.1:8/", 300)
    pipeline.web()
    api = Api(pipeline.web_url)

    exported = api.call("GET", "/watches/export")
    assert exported.status_code == 200 and exported.headers["Content-Type"].startswith("text/csv")
    assert exported.text == pipeline.cli("watch", "export").stdout
    assert exported.text.splitlines() == ["url,interval,name,tag,enabled", "http://reader:***@127.0.0.1:9/,1h,Nine,news,1",
                                          "http://127.0.0.1:8/,5m,,,1"]

    before = api.ok("GET", "/watches")
    for raw, params in ((b"http://127.0.0.1:7/\n", {"format": "bogus"}), (b"not xml at all", {"format": "opml"}),
                        (b"\xff\xfe\x00bad", {}), (b"jobs: [", {"format": "urlwatch"})):
        assert "\n" not in api.refused(400, "POST", "/watches/import", raw=raw, **params)
    assert api.ok("GET", "/watches") == before, "nothing changed"

    csv_file = (b"url,interval,name,tag\nhttp://127.0.0.1:7/,10m,Seven,news\nhttp://127.0.0.1:8/,5m,,\n"
                b"not-a-url,5m,,\nhttp://127.0.0.1:6/,5 parsecs,,\n")
    response = api.call("POST", "/watches/import", raw=csv_file)
    assert response.status_code == 200, response.text
    imported = response.json()
    assert (imported["added"], imported["skipped"], imported["refused"]) == (1, 1, 2)
    seven = [w for w in api.ok("GET", "/watches") if w["url"] == "http://127.0.0.1:7/"]
    assert [(w["name"], w["tag"], w["interval"]) for w in seven] == [("Seven", "news", "10m")]
    # The CLI reading the same file says the same about each entry (everything is known now).
    (tmp_path / "watches.csv").write_bytes(csv_file)
    cli = pipeline.cli("watch", "import", str(tmp_path / "watches.csv"))
    assert cli.stdout == "imported: 0 added, 2 skipped as duplicates, 2 refused as invalid\n"
    assert cli.stderr.splitlines() == imported["messages"]

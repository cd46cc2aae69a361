"""What another site, a rebinding DNS name or a hostile input can make the real web process
do: nothing, with a one-line refusal, and never a password shown."""
from __future__ import annotations

import re
import urllib.request

import requests

from monitor import amqp
from tests.helpers import wait_for
from tests.integration.test_web_api import Api


def test_another_sites_page_and_a_rebinding_name_change_nothing(pipeline):
    pipeline.web()
    api = Api(pipeline.web_url)
    body = {"url": "http://127.0.0.1:9/", "interval": "1h"}
    own = pipeline.web_url.rstrip("/")

    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Origin": "null"}, {"Sec-Fetch-Site": "same-site", "Origin": own}):
        response = requests.post(api.base + "/watches", json=body, headers=headers, timeout=10)
        assert response.status_code == 403 and "another site" in response.json()["error"], headers
    # (A form post from another site is refused too, whatever its CSRF field says.)
    page = requests.post(pipeline.web_url + "watches", data={**body, "csrf": "x"},
                         headers={"Origin": "https://evil.example"}, timeout=10)
    assert page.status_code == 403
    assert pipeline.store.list_watches() == []

    # DNS rebinding: the page's own name, now pointing at 127.0.0.1, gets no answer.
    rebound = requests.get(api.base + "/watches", headers={"Host": "attacker.example"}, timeout=10)
    assert rebound.status_code == 403 and "localhost only" in rebound.json()["error"]

    # The dashboard's own pages and scripts are served; nothing can frame them.
    added = requests.post(api.base + "/watches", json=body, headers={"Origin": own, "Sec-Fetch-Site": "same-origin"},
                          timeout=10)
    assert added.status_code == 201
    for path in ("", "watches", "api/v1/watches"):
        headers = requests.get(pipeline.web_url + path, timeout=10).headers
        assert headers["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in headers["Content-Security-Policy"]


def test_hostile_inputs_get_a_one_line_refusal_and_change_nothing(pipeline):
    pipeline.web()
    api = Api(pipeline.web_url)
    watch_id = pipeline.store.add_watch("http://127.0.0.1:9/", 3600).id
    huge = "9" * 30

    assert api.refused(400, "POST", "/watches", raw=b"[" * 100_000).startswith("the body must be a JSON object")
    api.refused(404, "DELETE", f"/watches/{2**63}")
    assert "NUL" in api.refused(400, "PATCH", f"/watches/{watch_id}", {"selector": "main\u0000"})
    api.refused(404, "DELETE", f"/proxies/{huge}")
    assert "bad regular expression" in api.refused(400, "POST", "/filters", {"rule": "include", "pattern": "/x{99999999999}/"})
    for tag in ("\u0000", "x" * 201):
        api.refused(400, "POST", "/filters", {"rule": "noise", "tag": tag})
        api.refused(400, "POST", "/sinks", {"kind": "webhook", "target": "http://127.0.0.1:9/hook", "tag": tag})
    assert "s3cret" not in api.refused(400, "POST", "/proxies", {"url": "http://u:s3cret@[::1:3128", "test": False})
    for target in ("http://[::1/hook?token=s3cret", "smtp://u:s3cret@127.0.0.1:99999/?to=a@b.example"):
        kind = target.partition(":")[0].replace("http", "webhook")
        assert "s3cret" not in api.refused(400, "POST", "/sinks", {"kind": kind, "target": target})
    error = api.refused(400, "POST", "/sinks", {"kind": "webhook", "target": "http://127.0.0.1:9/hook",
                                                "headers": {"Authorization": "Bearer s3cret\r"}})
    assert "control characters" in error and "s3cret" not in error
    assert "s3cret" not in api.refused(400, "POST", "/watches", {"url": "https://user:s3cret@127.0.0.1:99999/"})
    assert "at most 10000" in api.refused(400, "POST", "/watches/import",
                                          raw="".join(f"http://127.0.0.1:9/{n}\n" for n in range(10_001)).encode())
    assert api.call("POST", "/watches/import", raw=b"x" * (17 * 1024 * 1024)).status_code == 413

    # The dashboard's own routes: the live poll and a form whose CSRF field is not ASCII.
    for after in (huge, "-1", "1e3"):
        poll = requests.get(pipeline.web_url + "alerts/rows", params={"after": after}, timeout=10)
        assert poll.status_code == 400 and poll.text.count("\n") == 1, (after, poll.text)
    form = requests.post(pipeline.web_url + f"watches/{watch_id}/pause", data={"csrf": "é"}, timeout=10)
    assert form.status_code == 403

    assert [w.id for w in pipeline.store.list_watches()] == [watch_id] and pipeline.store.list_filters() == []
    assert pipeline.store.list_sinks() == [] and pipeline.store.list_proxies() == []
    assert pipeline.store.get_watch(watch_id).enabled


def test_a_dead_job_never_shows_its_watchs_password(pipeline):
    pipeline.worker()
    pipeline.web()
    # A job the worker refuses (no id) carrying a URL with a password, as the scheduler's jobs do.
    amqp.publish(pipeline.channel(), amqp.JOB_QUEUE, b'{"baseUrl": "https://editor:S3CRETPW@127.0.0.1:8/private"}')
    letters = wait_for(lambda: Api(pipeline.web_url).ok("GET", "/dead-letters"), timeout=30, message="the dead letter")
    assert "editor:***@127.0.0.1:8" in letters[0]["body"] and "S3CRETPW" not in letters[0]["body"]
    with urllib.request.urlopen(pipeline.web_url + "fleet", timeout=10) as response:
        fleet = response.read().decode()
    assert re.search(r"editor:\*\*\*@127\.0\.0\.1:8", fleet) and "S3CRETPW" not in fleet
    assert "S3CRETPW" not in pipeline.cli("dlq", "list").stdout

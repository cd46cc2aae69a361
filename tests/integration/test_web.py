"""The web front as a process: where it listens, who it lets in, what `monitor status` says.
(The API, the pages and the metrics have tests of their own.)"""
from __future__ import annotations

import urllib.error
import urllib.request

from tests.helpers import wait_for


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_off_loopback_without_a_token_the_web_front_refuses_to_start(pipeline):
    pipeline.env["MONITOR_WEB_BIND"] = "192.0.2.1:8080"  # (TEST-NET-1: could not even be bound here)
    proc = pipeline.spawn("monitor.web.server", "web")
    wait_for(lambda: proc.proc.poll() is not None, timeout=30, message="the web front exiting")
    assert proc.proc.returncode == 2
    assert "refusing to serve off loopback without a token" in proc.log_text()


def test_with_a_token_a_request_without_it_is_refused_and_one_with_it_served(pipeline):
    pipeline.env["MONITOR_WEB_TOKEN"] = "s3cret-token"
    pipeline.web()
    feed = pipeline.web_url + "feeds/all.atom"
    status, body = _get(feed)
    assert status == 401 and b"token is required" in body
    assert _get(feed, "wrong")[0] == 401
    assert _get(feed, "s3cret-token")[0] == 404, "past the token: no feed written yet"
    assert b"s3cret-token" not in pipeline.cli("status", "--json").stdout.encode()


def test_monitor_status_says_where_the_web_front_is(pipeline):
    assert pipeline.web_url in pipeline.cli("status").stdout

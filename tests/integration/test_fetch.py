"""Bounded fetching against a real local HTTP origin that misbehaves on purpose."""
from __future__ import annotations

import dataclasses
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from monitor.check import check_page
from monitor.config import Config
from monitor.fetch import Connections, FetchError, fetch
from monitor.messages import Job
from tests.hostile import HostileOrigin

CONFIG = Config(allow_private=True, fetch_max_bytes=100_000, fetch_deadline=3.0, fetch_read_timeout=2.0,
                fetch_max_redirects=3)


@pytest.fixture(scope="module")
def origin():
    hostile = HostileOrigin()
    yield hostile.base
    hostile.stop()


def _error(url: str, config: Config = CONFIG) -> str:
    with pytest.raises(FetchError) as caught:
        fetch(url, config)
    return str(caught.value)


def test_a_redirect_is_followed_to_the_final_url(origin):
    page = fetch(origin + "/hop", CONFIG)
    assert page.final_url == origin + "/ok" and page.body == b'<a href="/x">X</a>'


@pytest.mark.parametrize("path, reason", [
    ("/big", "body exceeds 0.1 MB"),
    ("/bomb", "body exceeds 0.1 MB"),
    ("/loop", "more than 3 redirects"),
    ("/pdf", "not HTML: content type application/pdf"),
    ("/missing", "HTTP 404"),
    ("/trickle", "deadline of 3s exceeded"),
])
def test_misbehaving_origins_end_as_one_line_reasons(origin, path, reason):
    started = time.monotonic()
    assert reason in _error(origin + path)
    assert time.monotonic() - started < CONFIG.fetch_deadline + CONFIG.fetch_read_timeout + 1


def test_private_targets_are_refused_unless_allowed(origin):
    strict = dataclasses.replace(CONFIG, allow_private=False)
    assert "non-public address 127.0.0.1" in _error(origin + "/ok", strict)
    assert "link-local address 169.254.169.254" in _error("http://169.254.169.254/latest/", strict)


def test_every_redirect_hop_is_checked_and_metadata_is_never_fetched(origin):
    """Even with private targets allowed, a redirect to the cloud metadata address is refused."""
    assert "refused: 169.254.169.254 resolves to link-local address" in _error(origin + "/to-metadata")


def test_a_lying_charset_is_read_as_declared_as_browsers_do(origin):
    task = check_page(Job(origin + "/lying", 1), CONFIG)
    assert task.status == "ok" and task.context == [{"url": origin + "/c", "text": "Caf\ufffd"}]


def test_a_failed_fetch_becomes_an_error_task(origin):
    task = check_page(Job(origin + "/missing", 7), CONFIG)
    assert (task.status, task.http_status, task.context, task.id) == ("error", 404, [], 7)
    assert task.error.startswith("HTTP 404")


def test_a_conditional_request_answered_304_becomes_a_small_not_modified_task(origin):
    first = check_page(Job(origin + "/validated", 5), CONFIG)
    assert first.status == "ok" and [link["url"] for link in first.context] == [origin + "/v"]
    assert (first.etag, first.last_modified) == ('"v1"', "Sun, 22 Nov 2026 08:00:00 GMT")

    again = check_page(Job(origin + "/validated", 5, etag=first.etag, content_hash=first.content_hash), CONFIG)
    assert (again.status, again.not_modified_by, again.http_status, again.context) == ("not_modified", "http", 304, [])
    assert again.content_hash == first.content_hash, "the validators of the last parsed body carry over"
    by_date = check_page(Job(origin + "/validated", 5, last_modified=first.last_modified), CONFIG)
    assert (by_date.status, by_date.not_modified_by) == ("not_modified", "http")


def test_an_unchanged_body_is_not_parsed_and_a_changed_one_is(origin):
    first = check_page(Job(origin + "/ok", 6), CONFIG)
    assert first.status == "ok" and first.etag is None and first.content_hash
    same = check_page(Job(origin + "/ok", 6, content_hash=first.content_hash), CONFIG)
    assert (same.status, same.not_modified_by, same.context) == ("not_modified", "hash", [])
    changed = check_page(Job(origin + "/ok", 6, content_hash="0" * 32), CONFIG)
    assert changed.status == "ok" and [link["url"] for link in changed.context] == [origin + "/x"]


class _KeepAliveHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections = 0

    def setup(self) -> None:
        type(self).connections += 1
        super().setup()

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        body = b'<a href="/x">X</a>' if self.path == "/ok" else b"gone " * 10_000
        self.send_response(200 if self.path == "/ok" else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_fetch_threads_share_keep_alive_connections_and_never_reuse_a_half_read_one():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    connections = Connections(CONFIG)
    try:
        for _ in range(3):  # one fetch after another, each from a thread of its own
            thread = threading.Thread(target=fetch, args=(base + "/ok", CONFIG, connections))
            thread.start()
            thread.join(10)
        assert _KeepAliveHandler.connections == 1
        with pytest.raises(FetchError, match="HTTP 404"):
            fetch(base + "/missing", CONFIG, connections)  # its body is left unread
        assert fetch(base + "/ok", CONFIG, connections).body == b'<a href="/x">X</a>'
        assert _KeepAliveHandler.connections == 2
    finally:
        server.shutdown()
        server.server_close()


def test_dns_rebinding_cannot_reach_a_refused_address(origin, monkeypatch):
    """The name answers the guard with a public address, then the connection with loopback
    (DNS rebinding): the address actually reached is checked, and refused."""
    real = socket.getaddrinfo
    answers = iter(["93.184.216.34"])  # the guard's look-up; every later one answers loopback

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        address = next(answers, "127.0.0.1")
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    port = origin.rsplit(":", 1)[1]
    with pytest.raises(FetchError, match="refused: connected to non-public address 127.0.0.1"):
        fetch(f"http://rebind.test:{port}/ok", dataclasses.replace(CONFIG, allow_private=False))


@pytest.mark.parametrize("path", ["/to-bad-ipv6", "/to-long-label"])
def test_a_redirect_to_an_unparsable_url_is_the_watchs_error_not_a_crash(origin, path):
    """urlsplit's ValueError and IDNA's UnicodeError used to escape and kill the worker."""
    task = check_page(Job(origin + path, 3), CONFIG)
    assert task.status == "error" and task.error.startswith("bad redirect: ")
    assert "\n" not in task.error


def test_the_pools_of_a_proxy_given_back_are_closed():
    """Proxies come and go over the years: their pools must not pile up in a worker."""
    connections = Connections(CONFIG)
    first = connections.manager("http://127.0.0.1:1")
    connections.drop(["http://127.0.0.1:1", "http://never-used:1"])
    assert connections.manager("http://127.0.0.1:1") is not first
    assert list(connections._managers) == ["http://127.0.0.1:1"]

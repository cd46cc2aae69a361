"""A local origin that misbehaves on purpose: one route per way a web server can hurt a crawler."""
from __future__ import annotations

import functools
import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.helpers import send


def _trickle(handler: BaseHTTPRequestHandler) -> None:
    """A body that never finishes: one byte every 0.2 s (never a read timeout), for 20 s at most."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.end_headers()
    for _ in range(100):
        handler.wfile.write(b"x")
        handler.wfile.flush()
        time.sleep(0.2)


def _validated(handler: BaseHTTPRequestHandler) -> None:
    """A page with validators that answers 304 to a request carrying them."""
    etag, modified = '"v1"', "Sun, 22 Nov 2026 08:00:00 GMT"
    if handler.headers.get("If-None-Match") == etag or handler.headers.get("If-Modified-Since") == modified:
        handler.send_response(304)
        handler.end_headers()
        return
    send(handler, b'<a href="/v">V</a>', headers={"ETag": etag, "Last-Modified": modified})


@functools.cache
def nested_page(depth: int = 100_000) -> bytes:
    return b"<html><body>" + b"<div>" * depth + b'<a href="/deep">deep</a>' + b"</div>" * depth


@functools.cache
def many_links_page(count: int = 200_000) -> bytes:
    return b"<html><body>" + b"".join(b'<a href="/l%d">link %d</a>' % (i, i) for i in range(count))


@functools.cache
def gzip_bomb() -> bytes:
    return gzip.compress(b"\0" * 200_000_000, compresslevel=9)


ROUTES = {
    "/ok": lambda h: send(h, b'<a href="/x">X</a>'),
    "/big": lambda h: send(h, b"<p>" + b"a" * 11_000_000),
    "/bomb": lambda h: send(h, gzip_bomb(), headers={"Content-Encoding": "gzip"}),
    "/loop": lambda h: send(h, b"", status=302, headers={"Location": "/loop"}),
    "/hop": lambda h: send(h, b"", status=301, headers={"Location": "/ok"}),
    "/to-metadata": lambda h: send(h, b"", status=302, headers={"Location": "http://169.254.169.254/latest/"}),
    "/to-bad-ipv6": lambda h: send(h, b"", status=302, headers={"Location": "http://[x/"}),
    "/to-long-label": lambda h: send(h, b"", status=302, headers={"Location": "http://" + "a" * 64 + ".example/"}),
    "/pdf": lambda h: send(h, b"%PDF-1.4", content_type="application/pdf"),
    "/missing": lambda h: send(h, b"gone", status=404),
    "/lying": lambda h: send(h, '<a href="/c">Café</a>'.encode("latin-1"), content_type="text/html; charset=utf-8"),
    "/invalid-bytes": lambda h: send(h, b'<a href="/i">\xff\xfe\x00 broken \xc3\x28 bytes</a>',
                                      content_type="text/html; charset=utf-8"),
    "/nested": lambda h: send(h, nested_page()),
    "/many-links": lambda h: send(h, many_links_page()),
    "/trickle": _trickle,
    "/validated": _validated,
}


class HostileOrigin:
    """Serves :data:`ROUTES` on 127.0.0.1 in a background thread."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                ROUTES[self.path](self)

            def log_message(self, *args) -> None:
                pass

        class QuietServer(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address) -> None:
                pass  # the client hanging up on a hostile response is the expected outcome

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

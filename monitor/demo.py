"""A local web site that publishes links, for ``monitor demo`` and for the tests' origin.

``LocalSite`` serves pages on 127.0.0.1. Each page is a list of links that grows when
:meth:`LocalSite.publish` is called (or every few seconds with ``autopublish``), like a
news homepage. :meth:`LocalSite.hold` makes a page hang until released (a slow origin).
"""
from __future__ import annotations

import html
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalSite:
    """``address`` may be any loopback address (127.0.0.0/8): sites on different addresses
    are different hosts to the fleet, which fetches one page per host at a time."""

    def __init__(self, port: int = 0, address: str = "127.0.0.1") -> None:
        self.pages: dict[str, list[tuple[str, str]]] = {}
        self.lock = threading.Lock()
        self.requests = 0
        self.holds: dict[str, tuple[threading.Event, threading.Event]] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                path = self.path.split("?", 1)[0]
                with site.lock:
                    site.requests += 1
                    hold = site.holds.get(path)
                if hold is not None:
                    entered, released = hold
                    entered.set()
                    released.wait(120)
                with site.lock:
                    links = list(site.pages.get(path, ()))
                if path not in site.pages:
                    self.send_error(404)
                    return
                items = "".join(f'<li><a href="{html.escape(url)}">{html.escape(text)}</a>' for url, text in links)
                body = f"<!doctype html><title>Local news</title><h1>Latest</h1><ul>{items}</ul>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((address, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._stop = threading.Event()

    @property
    def base(self) -> str:
        address, port = self.server.server_address[:2]
        return f"http://{address}:{port}"

    def url(self, path: str = "/") -> str:
        return self.base + path

    def add_page(self, path: str, links: list[tuple[str, str]] | None = None) -> str:
        """Create a page (with initial ``(href, text)`` links); return its URL."""
        with self.lock:
            self.pages[path] = list(links or [])
        return self.url(path)

    def publish(self, path: str, href: str, text: str) -> None:
        """Put a new link at the top of a page, as a news site does."""
        with self.lock:
            self.pages.setdefault(path, []).insert(0, (href, text))

    def hold(self, path: str) -> threading.Event:
        """Make requests for ``path`` hang until :meth:`release`; return an event set when one arrives."""
        entered = threading.Event()
        with self.lock:
            self.holds[path] = (entered, threading.Event())
        return entered

    def release(self, path: str) -> None:
        with self.lock:
            _, released = self.holds.pop(path)
        released.set()

    def autopublish(self, path: str, every: float) -> None:
        """Publish ``Story N`` on ``path`` every ``every`` seconds until :meth:`stop`."""
        def loop() -> None:
            number = len(self.pages.get(path, [])) + 1
            while not self._stop.wait(every):
                self.publish(path, f"/stories/{number}", f"Story number {number}")
                number += 1
        threading.Thread(target=loop, daemon=True).start()

    def start(self) -> "LocalSite":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for path in list(self.holds):
            self.release(path)
        self.server.shutdown()
        self.server.server_close()

"""A fast local origin for benchmarks: N homepages, each a site of its own.

Page ``i`` is served at ``http://127.0.X.Y:PORT/`` on its own loopback address (the fleet
fetches one page per host at a time, and these pages stand for different sites), by one
asyncio event loop in a background thread (HTTP/1.1, keep-alive). The bodies are real
homepages from the shared corpus (those of 50-200 KB with 100-500 links: real markup is
what parsers are slow on), cycled over the sites. :meth:`Origin.mutate` publishes new
links at the top of a page's body, as a news site does.

With ``validators``, responses carry ``ETag`` and ``Last-Modified`` and a conditional
request for an unchanged page gets ``304`` (urlwatch sends them too). Off by default:
news homepages are generated per request and rarely answer 304.
``delay=(low, high)`` holds each response for a uniform random time, as a WAN would.
"""
from __future__ import annotations

import asyncio
import email.utils
import hashlib
import random
import re
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
_BODY_TAG = re.compile(rb"<body[^>]*>", re.IGNORECASE)


def address(index: int) -> str:
    """The loopback address of page ``index`` (127.0.1.1, 127.0.1.2, ...)."""
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


def homepages(minimum: int = 50_000, maximum: int = 200_000, min_links: int = 100, max_links: int = 500) -> list[bytes]:
    """Corpus pages of homepage size (counted with the product's own link extraction) on
    which a link published after ``<body>`` is a link a browser shows."""
    from monitor.parsing import extract_links
    pages = []
    for path in sorted(CORPUS.glob("*.html")):
        page = Page(path.read_bytes(), [b'<p><a href="/probe">Probe</a></p>'])
        page.render()
        links = {link.url for link in extract_links(page.body, "https://x.example/")}
        if minimum <= len(page.template) <= maximum and min_links <= len(links) <= max_links \
                and "https://x.example/probe" in links:
            pages.append(page.template)
    if not pages:
        raise SystemExit(f"no homepage-sized pages in {CORPUS}")
    return pages


@dataclass
class Page:
    template: bytes
    fresh: list[bytes] = field(default_factory=list)
    version: int = 0
    body: bytes = b""
    etag: str = ""
    modified: str = ""

    def render(self) -> None:
        match = _BODY_TAG.search(self.template)
        at = match.end() if match else 0
        self.body = self.template[:at] + b"".join(self.fresh) + self.template[at:]
        self.etag = '"%s"' % hashlib.sha1(self.body).hexdigest()[:16]
        self.modified = email.utils.formatdate(1_700_000_000 + self.version * 60, usegmt=True)


class Origin:
    def __init__(self, pages: int, seed: int = 1, validators: bool = False,
                 delay: tuple[float, float] | None = None) -> None:
        templates = homepages()
        self.pages = [Page(templates[i % len(templates)]) for i in range(pages)]
        for page in self.pages:
            page.render()
        self.by_address = {address(i): page for i, page in enumerate(self.pages)}
        self.validators = validators
        self.delay = delay
        self.rng = random.Random(seed)
        self.requests = 0
        self.not_modified = 0
        self.port = self._free_port()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @staticmethod
    def _free_port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    def url(self, index: int) -> str:
        return f"http://{address(index)}:{self.port}/"

    def mutate(self, index: int, links: int, generation: int) -> list[str]:
        """Publish ``links`` new links at the top of page ``index``; return their URLs."""
        page = self.pages[index]
        paths = [f"/breaking/{generation}/{index}-{n}.html" for n in range(links)]
        page.fresh[:0] = [f'<p><a href="{path}">Breaking story {path[10:-5]}</a></p>'.encode() for path in paths]
        page.version += 1
        page.render()
        return [self.url(index).rstrip("/") + path for path in paths]

    # --- serving -------------------------------------------------------------------------------
    def start(self) -> "Origin":
        self.thread.start()
        if not self.ready.wait(30):
            raise RuntimeError("the origin did not start")
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        for host in self.by_address:
            self.loop.run_until_complete(asyncio.start_server(self._client, host, self.port, backlog=256))
        self.ready.set()
        self.loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        page = self.by_address[writer.get_extra_info("sockname")[0]]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests += 1
                headers = {}
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                if self.delay:
                    await asyncio.sleep(self.rng.uniform(*self.delay))
                writer.write(self._response(page, headers))
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def _response(self, page: Page, headers: dict[str, str]) -> bytes:
        validators = f"ETag: {page.etag}\r\nLast-Modified: {page.modified}\r\n" if self.validators else ""
        if self.validators and (headers.get("if-none-match") == page.etag or
                                ("if-none-match" not in headers and headers.get("if-modified-since") == page.modified)):
            self.not_modified += 1
            return f"HTTP/1.1 304 Not Modified\r\n{validators}Content-Length: 0\r\n\r\n".encode()
        return (f"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(page.body)}\r\n"
                f"{validators}\r\n").encode() + page.body

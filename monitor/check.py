"""One check of one page: fetch, extract, and describe the outcome as a task message.

Shared by the workers and by ``monitor check URL``, so the debugging aid sees exactly
what the fleet sees.

Work that cannot change the result is skipped: the fetch is conditional (the validators of
the last check travel with the job, and a 304 becomes a small ``not_modified`` task), and a
body that hashes as the last one did is not parsed at all.

The HTML5 tree-construction algorithm needs time quadratic in the nesting depth, in C
(lexbor: 10 s for 100,000 nested elements) as in Python (html5lib: an hour), and a C parser
cannot be interrupted. So a page nesting deeper than ``MAX_NESTING`` elements is refused
before parsing (browsers cap the tree depth themselves: Chromium at 512), and parsing in
the main thread also runs under ``parse_deadline``.

A watch with a CSS selector keeps only the links inside the regions it matches; a selector
that matches nothing on the page makes the check an error (``selector 'main' matched
nothing on the page``), so a redesign that removed the region shows in ``watch list`` and
alerts as a broken watch, instead of passing for a page without links.
"""
from __future__ import annotations

import hashlib
import re
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from monitor import filters
from monitor.config import Config
from monitor.parsing import BadSelector, NoRegion, extract_links
from monitor.fetch import Connections, FetchError, Page, fetch
from monitor.messages import Job, Task
from monitor.urls import BadURL, comparable, normalize

MAX_NESTING = 10_000  # lexbor parses 10,000 nested elements in 0.07 s, html5lib in 7 s
_TAG = re.compile(rb"<(/?)([a-zA-Z][^\s/>]*)")
_VOID = frozenset(b"area base br col embed hr img input link meta source track wbr param keygen".split())
# A start tag of these closes an open element of the same name (an unclosed <li> or <p> list is flat).
_SELF_CLOSING_SIBLINGS = frozenset(b"li p option dt dd tr td th".split())


class PageTooComplex(Exception):
    """A page refused before or while parsing; ``str(error)`` says why."""


def nesting_depth_exceeds(body: bytes, limit: int = MAX_NESTING) -> bool:
    """Whether the page may nest more than ``limit`` elements.

    A page with fewer start tags than ``limit`` cannot (two byte counts: nearly every page
    stops there). Otherwise the tags are replayed on a stack of names: an end tag closes
    up to its open element and is ignored when there is none (as HTML5 ignores a stray end
    tag, so stray end tags cannot hide depth); void elements never open.
    """
    if body.count(b"<") - body.count(b"</") <= limit:
        return False
    stack: list[bytes] = []
    open_count: dict[bytes, int] = {}
    for closing, name in _TAG.findall(body):
        name = name.lower()
        if closing or name in _SELF_CLOSING_SIBLINGS:
            if open_count.get(name):
                while True:
                    popped = stack.pop()
                    open_count[popped] -= 1
                    if popped == name:
                        break
            if closing:
                continue
        if name in _VOID:
            continue
        stack.append(name)
        open_count[name] = open_count.get(name, 0) + 1
        if len(stack) > limit:
            return True
    return False


def content_hash(page: Page, selector: str | None = None) -> str:
    """What decides the links: the final URL, the declared charset, the body and the
    watch's selector (a body hashed under another selector is parsed again; a watch without
    one hashes as before selectors existed)."""
    # SHA-256: twice as fast as BLAKE2 where the CPU has SHA instructions. (Changing the
    # function costs each watch one more parse, which finds no new link.)
    digest = hashlib.sha256()
    parts = [page.final_url.encode("utf-8"), (page.charset or "").encode("ascii", "replace"), page.body]
    if selector is not None:
        parts.append(selector.encode("utf-8"))
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:32]


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise PageTooComplex in the main thread after ``seconds`` (no limit in other threads)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):  # noqa: ARG001 - signal handler signature
        raise PageTooComplex(f"parsing took more than {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def task_from_error(job: Job, exc: FetchError, fetched_at: float, worker: str | None = None) -> Task:
    """The task for a fetch that failed."""
    return Task(job.base_url, job.id, [], status="error", error=str(exc), final_url=exc.final_url,
                fetched_at=fetched_at, elapsed_ms=int((time.time() - fetched_at) * 1000),
                http_status=exc.http_status, worker=worker)


def task_from_page(job: Job, page: Page, config: Config, fetched_at: float, worker: str | None = None) -> Task:
    """The task for a fetched page: ``not_modified`` when the server said 304 or the body
    hashes as last time, else its links (under the nesting limit, the parse deadline and
    the link cap)."""
    common = {"final_url": page.final_url, "fetched_at": fetched_at, "elapsed_ms": page.elapsed_ms,
              "http_status": page.http_status, "worker": worker, "etag": page.etag, "last_modified": page.last_modified,
              "selector": job.selector}
    if page.http_status == 304:
        return Task(job.base_url, job.id, [], status="not_modified", not_modified_by="http",
                    content_hash=job.content_hash, **common)
    digest = content_hash(page, job.selector)
    if digest == job.content_hash:
        return Task(job.base_url, job.id, [], status="not_modified", not_modified_by="hash", content_hash=digest, **common)
    outcome = {"status": "ok", "error": None}
    links = []
    parse_started = time.perf_counter()
    try:
        if nesting_depth_exceeds(page.body):
            raise PageTooComplex(f"nesting deeper than {MAX_NESTING} elements")
        with time_limit(config.parse_deadline):
            # One more than the cap, to know whether the page had more.
            links = extract_links(page.body, page.final_url, page.charset, limit=config.max_links_per_page + 1,
                                  engine=config.parser, selector=job.selector)
    except (NoRegion, BadSelector) as exc:
        # An error, not "ok with no links": the processor must not read it as the page
        # losing its links, and `watch list` shows the reason.
        outcome = {"status": "error", "error": str(exc)}
    except PageTooComplex as exc:
        outcome = {"status": "error", "error": f"page too complex: {exc}"}
    except RecursionError:
        outcome = {"status": "error", "error": "page nesting too deep to parse"}
    except Exception as exc:  # a hostile page must end as a status, never as a crashing worker
        outcome = {"status": "error", "error": f"could not parse the page: {type(exc).__name__}: {exc}"[:300]}
    parse_ms = round((time.perf_counter() - parse_started) * 1000, 3)  # (a small page takes well under 1 ms)
    if len(links) > config.max_links_per_page:
        links = links[:config.max_links_per_page]
        outcome["error"] = f"more than {config.max_links_per_page} links: only the first {config.max_links_per_page} are watched"
    return Task(job.base_url, job.id, [link.as_dict() for link in links], parse_ms=parse_ms,
                content_hash=digest if outcome["status"] == "ok" else None, **common, **outcome)


def check_page(job: Job, config: Config, connections: Connections | None = None, worker: str | None = None,
               proxy: str | None = None) -> Task:
    """Fetch ``job.base_url`` once and return the task to publish: its links, or an error status."""
    fetched_at = time.time()
    try:
        page = fetch(job.base_url, config, connections, proxy, job.etag, job.last_modified)
    except FetchError as exc:
        return task_from_error(job, exc, fetched_at, worker)
    return task_from_page(job, page, config, fetched_at, worker)


def _compared(url: str) -> str:
    """``url`` in the form the store keeps links in (as it is, when it has none)."""
    try:
        return comparable(normalize(url))
    except BadURL:
        return url


def noise_of(task: Task, db_path: Path) -> tuple[dict[str, str], str | None]:
    """For ``monitor check``: the links of ``task`` a noise rule would hold back, ``{url:
    reason}``, and a note when site furniture could not be judged. That needs the links of
    the site's watched pages, read from the store at ``db_path`` (only read: the check
    changes nothing) when a home is there."""
    from monitor.store import Store  # (only the CLI's check reads a store here, never a worker)

    store = Store(db_path) if db_path.exists() else None
    try:
        noise = filters.LinkFilter([filters.Rule(0, "noise", "", None, None)], task.base_url,
                                   None if store is None else filters.SitePages(store))
        dropped = {link["url"]: reason for link in task.context
                   if (reason := noise.held_back(_compared(link["url"]), link["text"]))}
    finally:
        if store is not None:
            store.close()
    if store is not None:
        return dropped, None
    return dropped, f"site-wide links (navigation, footers) need a home's watched pages: no home at {db_path.parent}"

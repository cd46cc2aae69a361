"""One check of one page: fetch, extract, and describe the outcome as a task message.

Shared by the workers and by ``monitor check URL``, so the debugging aid sees exactly
what the fleet sees. Parsing runs under a deadline: html5lib, like the HTML5 algorithm it
implements, needs time quadratic in the nesting depth, and a hostile page nesting 100,000
elements would otherwise hold a worker for an hour.
"""
from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import requests

from monitor.config import Config
from monitor.extract import extract_links
from monitor.fetch import FetchError, Page, fetch
from monitor.messages import Job, Task


class ParseTimeout(Exception):
    """Parsing the page took longer than the configured deadline."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ParseTimeout in the main thread after ``seconds`` (no limit in other threads)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):  # noqa: ARG001 - signal handler signature
        raise ParseTimeout()

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
    """Extract the page's links (under the parse deadline and the link cap) into a task."""
    outcome = {"status": "ok", "error": None}
    links = []
    try:
        with time_limit(config.parse_deadline):
            # One more than the cap, to know whether the page had more.
            links = extract_links(page.body, page.final_url, page.charset, limit=config.max_links_per_page + 1)
    except ParseTimeout:
        outcome = {"status": "error", "error": f"page too complex: parsing took more than {config.parse_deadline:g}s"}
    except RecursionError:
        outcome = {"status": "error", "error": "page nesting too deep to parse"}
    except Exception as exc:  # a hostile page must end as a status, never as a crashing worker
        outcome = {"status": "error", "error": f"could not parse the page: {type(exc).__name__}: {exc}"[:300]}
    if len(links) > config.max_links_per_page:
        links = links[:config.max_links_per_page]
        outcome["error"] = f"more than {config.max_links_per_page} links: only the first {config.max_links_per_page} are watched"
    return Task(job.base_url, job.id, [link.as_dict() for link in links], final_url=page.final_url, fetched_at=fetched_at,
                elapsed_ms=page.elapsed_ms, http_status=page.http_status, worker=worker, **outcome)


def check_page(job: Job, config: Config, session: requests.Session | None = None, worker: str | None = None,
               proxy: str | None = None) -> Task:
    """Fetch ``job.base_url`` once and return the task to publish: its links, or an error status."""
    fetched_at = time.time()
    try:
        page = fetch(job.base_url, config, session, proxy)
    except FetchError as exc:
        return task_from_error(job, exc, fetched_at, worker)
    return task_from_page(job, page, config, fetched_at, worker)

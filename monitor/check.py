"""One check of one page: fetch, extract, and describe the outcome as a task message.

Shared by the workers and by ``monitor check URL``, so the debugging aid sees exactly
what the fleet sees.
"""
from __future__ import annotations

import time

import requests

from monitor.config import Config
from monitor.extract import extract_links
from monitor.fetch import FetchError, Page, fetch
from monitor.messages import Job, Task


def _parse_failure(job: Job, page: Page, fetched_at: float, worker: str | None, reason: str) -> Task:
    return Task(job.base_url, job.id, [], status="error", error=reason, final_url=page.final_url,
                fetched_at=fetched_at, elapsed_ms=page.elapsed_ms, http_status=page.http_status, worker=worker)


def check_page(job: Job, config: Config, session: requests.Session | None = None, worker: str | None = None) -> Task:
    """Fetch ``job.base_url`` and return the task to publish: its links, or an error status."""
    fetched_at = time.time()
    try:
        page = fetch(job.base_url, config, session)
    except FetchError as exc:
        return Task(job.base_url, job.id, [], status="error", error=str(exc), final_url=exc.final_url,
                    fetched_at=fetched_at, elapsed_ms=int((time.time() - fetched_at) * 1000),
                    http_status=exc.http_status, worker=worker)
    try:
        links = extract_links(page.body, page.final_url, page.charset, limit=config.max_links_per_page)
    except RecursionError:
        return _parse_failure(job, page, fetched_at, worker, "page nesting too deep to parse")
    except Exception as exc:  # a hostile page must end as a status, never as a crashing worker
        return _parse_failure(job, page, fetched_at, worker, f"could not parse the page: {type(exc).__name__}: {exc}"[:300])
    return Task(job.base_url, job.id, [link.as_dict() for link in links], status="ok", final_url=page.final_url,
                fetched_at=fetched_at, elapsed_ms=page.elapsed_ms, http_status=page.http_status, worker=worker)

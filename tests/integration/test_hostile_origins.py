"""Hostile or broken origins, through the whole pipeline: each ends as a clear status on the
watch, the worker stays up with bounded memory, and the next watch is processed normally."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.hostile import HostileOrigin

MEMORY_BOUND_MB = 1024

CASES = [
    ("/trickle", "error: deadline of 3s exceeded while reading the body"),
    ("/big", "error: body exceeds 10 MB"),
    ("/bomb", "error: body exceeds 10 MB"),
    ("/loop", "error: more than 5 redirects"),
    ("/to-metadata", "error: refused: 169.254.169.254 resolves to link-local address"),
    ("/pdf", "error: not HTML: content type application/pdf"),
    ("/lying", "ok"),
    ("/invalid-bytes", "ok"),
    ("/nested", "error: page too complex: nesting deeper than 10000 elements"),
    ("/many-links", "ok (more than 20000 links: only the first 20000 are watched)"),
]


@pytest.fixture(scope="module")
def hostile():
    origin = HostileOrigin()
    yield origin
    origin.stop()


def _peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")) / 1024


@pytest.mark.parametrize("path, status", CASES, ids=[path for path, _ in CASES])
def test_hostile_origin_ends_as_a_status_and_the_worker_carries_on(pipeline, hostile, site, path, status):
    # Parsing 200,000 links takes seconds (html5lib); 100,000 nested elements are refused before parsing.
    pipeline.configure(fetch_deadline=3.0, fetch_read_timeout=2.0, parse_deadline=30.0 if path == "/many-links" else 5.0)
    pipeline.processor()
    worker = pipeline.worker()
    bad = pipeline.store.add_watch(hostile.base + path, 3600).id
    good = pipeline.store.add_watch(site.add_page("/", [("/fine", "Fine")]), 3600).id

    pipeline.publish_job(bad)
    wait_for(lambda: pipeline.watch(bad).last_status, timeout=90, message=f"a status for {path}")
    assert pipeline.watch(bad).last_status.startswith(status)
    listed = pipeline.cli("watch", "list")
    assert status[:40] in listed.stdout, listed.stdout

    assert worker.proc.poll() is None, "the worker must survive"
    peak = _peak_rss_mb(worker.proc.pid)
    print(f"{path}: worker peak RSS {peak:.0f} MB")
    assert peak < MEMORY_BOUND_MB

    pipeline.publish_job(good)
    wait_for(lambda: pipeline.watch(good).last_status == "ok", timeout=60, message="the next watch")
    assert [link.url for link in pipeline.store.links(good)] == [site.url("/fine")]

"""Link extraction over the shared corpus of real saved web pages (``/work/shared/corpus``).

Each page is extracted as if fetched from ``https://<host derived from its file name>/page``;
the results are cached so the corpus-wide checks do not parse every page twice.
"""
from __future__ import annotations

import functools
import re
import statistics
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from monitor.parsing import Link, extract_links

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
PAGES = sorted(CORPUS.glob("*.html"))
MIN_MEDIAN_LINKS = 20


def page_url(path: Path) -> str:
    """``heise.de.lithium.html`` -> ``https://heise.de.lithium/page`` (non-ASCII and odd characters become '-')."""
    host = re.sub(r"[^a-z0-9.-]+", "-", path.stem.lower()).strip("-.")
    return f"https://{host}/page"


@functools.lru_cache(maxsize=None)
def links_of(path: Path) -> tuple[Link, ...]:
    return tuple(extract_links(path.read_bytes(), page_url(path)))


def test_corpus_is_present() -> None:
    assert CORPUS.is_dir(), f"corpus directory {CORPUS} is missing: the shared corpus must sit beside the repository"
    assert PAGES, f"no *.html pages in {CORPUS}"


@pytest.mark.parametrize("path", PAGES, ids=[path.name for path in PAGES])
def test_page_links_are_absolute_web_urls_without_fragment(path: Path) -> None:
    found = links_of(path)
    for link in found:
        parts = urlsplit(link.url)
        assert parts.scheme in ("http", "https"), link.url
        assert parts.hostname, link.url
        assert "#" not in link.url and not parts.fragment, link.url
        assert link.text == " ".join(link.text.split()), link.text
    urls = [link.url for link in found]
    assert len(urls) == len(set(urls)), "duplicate URLs"


def test_median_link_count_is_plausible() -> None:
    assert PAGES, f"no *.html pages in {CORPUS}"
    median = statistics.median(len(links_of(path)) for path in PAGES)
    assert median > MIN_MEDIAN_LINKS, f"median of {median} links per page"


def test_relative_links_resolve_against_the_page_host() -> None:
    """Across the corpus, some links point back to the page's own (file-name-derived) host."""
    own_host = sum(any(urlsplit(link.url).hostname == urlsplit(page_url(path)).hostname for link in links_of(path))
                   for path in PAGES)
    assert own_host > len(PAGES) // 2

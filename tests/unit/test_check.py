"""What a check refuses before parsing, and what makes a body "unchanged" (``monitor.check``)."""
from __future__ import annotations

from pathlib import Path

from monitor.check import MAX_NESTING, content_hash, nesting_depth_exceeds
from monitor.fetch import Page

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"


def test_deep_nesting_is_detected_and_stray_end_tags_cannot_hide_it():
    assert nesting_depth_exceeds(b"<div>" * (MAX_NESTING + 1) + b"</div>" * (MAX_NESTING + 1))
    assert nesting_depth_exceeds(b"<div></span>" * (MAX_NESTING + 1)), "an end tag with no open element is ignored"
    assert nesting_depth_exceeds(b"<section><b>" * (MAX_NESTING // 2 + 1))


def test_long_flat_pages_are_not_refused():
    assert not nesting_depth_exceeds(b"<ul>" + b"<li><a href=/x>x</a>" * (3 * MAX_NESTING) + b"</ul>"), "unclosed <li> are siblings"
    assert not nesting_depth_exceeds(b"<p>text" * (3 * MAX_NESTING)), "unclosed <p> are siblings"
    assert not nesting_depth_exceeds(b"<div><br><img src=x></div>" * (3 * MAX_NESTING)), "void elements never open"
    assert not any(nesting_depth_exceeds(path.read_bytes()) for path in CORPUS.glob("*.html"))


def test_the_content_hash_covers_the_final_url_the_charset_and_the_body():
    page = Page("https://example.org/", 200, b"<a href=/a>a</a>", "utf-8", 10)
    same = Page("https://example.org/", 200, b"<a href=/a>a</a>", "utf-8", 99, etag='"x"')
    assert content_hash(page) == content_hash(same), "timing and validators do not change the links"
    for other in (Page("https://example.org/other/", 200, page.body, "utf-8", 10),
                  Page("https://example.org/", 200, page.body, "latin-1", 10),
                  Page("https://example.org/", 200, b"<a href=/b>b</a>", "utf-8", 10)):
        assert content_hash(other) != content_hash(page)

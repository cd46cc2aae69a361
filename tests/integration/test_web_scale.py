"""The dashboard over a long watch list: pages of it, and a search that finds only what is shown."""
from __future__ import annotations

import re
import urllib.request


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def _rows(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<tr id="watch-(\d+)"', html)]


def test_the_watch_list_comes_in_pages_and_its_search_never_finds_a_password(pipeline):
    ids = [pipeline.store.add_watch(f"http://127.0.0.1:9/site-{n}", 3600).id for n in range(250)]
    secret = pipeline.store.add_watch("http://editor:s3cret@127.0.0.1:9/private", 3600, "Private desk").id
    pipeline.web()
    base = pipeline.web_url + "watches"

    first = _page(base)
    assert _rows(first) == ids[:100] and "page 1 of 3" in first and 'rel="next"' in first and 'rel="prev"' not in first
    last = _page(base + "?page=3")
    assert _rows(last) == ids[200:] + [secret] and 'rel="next"' not in last
    assert _rows(_page(base + "?page=99")) == _rows(last), "a page past the end is the last one"
    assert _rows(_page(base + "?page=x")) == ids[:100]

    found = _page(base + "?q=SITE-12")  # any case; site-12 and site-120 to site-129
    assert _rows(found) == [ids[12]] + ids[120:130] and 'id="pages"' not in found
    assert _rows(_page(base + "?q=private+desk")) == [secret], "the name is searched"
    assert _rows(_page(base + "?q=editor")) == [secret], "the user name is shown, so it is found"
    nothing = _page(base + "?q=s3cret")
    assert _rows(nothing) == [] and "No watch matches" in nothing, "a password is never shown, nor found"

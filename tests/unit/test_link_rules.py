"""The string fast paths of URL resolution (``monitor.parsing.links.Resolver``) and of
normalisation (``monitor.urls.normalize``) agree with the long way (urljoin, urlsplit,
quote) on every input: real-looking hrefs and random ones against several bases."""
from __future__ import annotations

import random

import pytest

from monitor import urls
from monitor.parsing import links
from monitor.parsing.links import ASCII_WHITESPACE, Resolver, _slow_resolve

BASES = ["https://example.com/dir/page.html", "http://127.0.0.5:8080/", "https://h.example/a/b/?q=/x",
         "https://example.com", "HTTPS://Example.com/x", "https://example.com:443/p", "http://example.com/dir/"]
HREFS = ["sibling", "../up", "/root", "?q=1", "//cdn.example.net/x", "HTTP://Other.ORG:80/Path", "/a\nb", "a//b",
         "/a//b", "https://x.org", "https://x.org?", "https://x.org/p?", "https://x.org/p?a=1#f", "http://x.org:80/",
         "http://x.org:8080", "http://x.org:99999/", "/.well-known/x", "a/./b", "a/../b", "/p.html", "/p.", "x:y",
         "mailto:a@b", "javascript:x", "/caf%C3%A9", "/caf%c3%a9", "/%7euser", "/%7Euser", "/50%", "/%zz", "/é",
         "/a b", "https://x.org/a/b/", "seg/", "/", "a?b=c/d", "/path;param", "/~user", "https://user@x.org/",
         "https://X.org/", "https://x.org./", "/a?b?c", "/a?", "https://x.org/a.b.c/d", "tel:123", "/x#y?z",
         "a:b/c", "a/b:c", "/q?x=%41", "/q?x=%2F"]


def _random_hrefs(count: int) -> list[str]:
    rng = random.Random(7)
    chars = "ab/.?#:%-_~é \\A=&2E7fF"
    hrefs = []
    for _ in range(count):
        tail = "".join(rng.choice(chars) for _ in range(rng.randint(0, 10)))
        hrefs.append(rng.choice(["", "/", "https://x.org/", "http://x.org:81/", "//x.org/"]) + tail)
    return hrefs


@pytest.fixture
def long_way_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """normalize() without its fast path: the reference the fast paths are held to."""
    monkeypatch.setattr(links, "normalize", urls._canonical)


def test_normal_form_urls_are_recognised_as_normalize_would_write_them() -> None:
    for href in HREFS + _random_hrefs(5000):
        url = href if href.startswith("http") else "https://x.org/" + href.lstrip("/")
        try:
            expected = urls._canonical(url)
        except urls.BadURL:
            continue
        assert urls.normalize(url) == expected, url


@pytest.mark.parametrize("base", BASES)
def test_every_href_resolves_as_urljoin_and_normalize_say(base: str, long_way_only: None) -> None:
    resolver = Resolver(base)
    for href in HREFS + _random_hrefs(5000):
        stripped = href.strip(ASCII_WHITESPACE)
        expected = None if not stripped or stripped[0] == "#" else _slow_resolve(base, stripped)
        assert resolver.resolve(href) == expected, f"base {base!r}, href {href!r}"

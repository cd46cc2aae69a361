"""The link rules both parse engines share: what an anchor's URL and text are, which base
they resolve against, and how the page's list is kept (each URL once, first wins, capped).

* URL: the ``href`` (for an SVG ``<a>`` without one, ``xlink:href``: browsers follow both)
  resolved against the document base, kept when it is http(s), fragment dropped,
  normalised by :func:`monitor.urls.normalize`.
* Text: what a browser shows inside the anchor, whitespace-normalised; never the content
  of ``<script>``, ``<style>`` or ``<template>``.
* Base: the first ``<base href>`` outside any ``<template>``, resolved against the page URL.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin

from monitor.urls import WEB_SCHEMES, BadURL, normalize

ASCII_WHITESPACE = " \t\n\r\f"
HIDDEN_TEXT = frozenset({"script", "style", "template"})

# A URL in this shape is already what normalize() returns (minus fragment and empty query):
# lower-case http(s), a plain lower-case host, a port that is not the default, and a path
# and query of characters quote() leaves alone, with no dot segment and only upper-case
# escapes of characters that are not unreserved.
_CHAR = r"[A-Za-z0-9:@!$&'()*+,;=\-_~%]"  # a "%" must start an escape: checked apart
_PLAIN = r"(?:/(?![.])" + _CHAR + r"*(?:\." + _CHAR + r"+)*)*"
_QUERY = r"(?:\?[A-Za-z0-9/:@!$&'()*+,;=\-._~?%]*)?"
_ABSOLUTE = re.compile(r"(https?)://[a-z0-9_-]+(?:\.[a-z0-9_-]+)*(?::([1-9][0-9]{0,4}))?"
                       r"(" + _PLAIN + r"/?)(" + _QUERY + r")(?:#.*)?", re.S)
_PATH = re.compile(r"(" + _PLAIN + r"/?)(" + _QUERY + r")(?:#.*)?", re.S)
# normalize() rewrites these: a lone "%", a lower-case escape, an escaped unreserved character.
_UNUSUAL_ESCAPE = re.compile(r"%(?![0-9A-F]{2})|%(?:2[DE]|3[0-9]|4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE])")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


@dataclass(frozen=True)
class Link:
    url: str
    text: str

    def as_dict(self) -> dict[str, str]:
        return {"url": self.url, "text": self.text}


def _slow_resolve(base: str, href: str) -> str | None:
    if ":" not in href.split("/", 1)[0] or href.lower().startswith(WEB_SCHEMES):
        href = href.replace("\\", "/")  # browsers read a backslash as a slash in web URLs
    try:
        url = urljoin(base, href)
        if url.split(":", 1)[0].lower() not in WEB_SCHEMES:
            return None  # javascript:, mailto:, tel:, data:, ...
        return normalize(url)
    except (BadURL, ValueError):
        return None


def _plain_absolute(url: str) -> tuple[str, str, str] | None:
    """``(origin, path, query)`` of a URL already in normal form, else None."""
    match = _ABSOLUTE.fullmatch(url)
    if match is None:
        return None
    port = match.group(2)
    if port is not None and (port == _DEFAULT_PORTS[match.group(1)] or int(port) > 65535):
        return None
    return url[:match.start(3)], match.group(3) or "/", match.group(4)


def _joined(prefix: str, path: str, query: str) -> str:
    """URL from normal-form parts; an empty query (a lone ``?``) is dropped, as normalize does."""
    return prefix + path + (query if len(query) > 1 else "")


class Resolver:
    """Resolves the hrefs of one page against its base, each distinct href once.

    Most hrefs on real pages are plain absolute, root-relative or relative URLs already in
    normal form; they take a string fast path. Everything else goes through ``urljoin``
    and :func:`normalize`, the one definition of a link's canonical form (the fast path is
    tested to agree with it).
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self.cache: dict[str, str | None] = {}
        parts = _plain_absolute(base)
        self.origin = parts[0] if parts else None
        self.directory = parts[1][:parts[1].rindex("/")] if parts else ""  # without the last "/"

    def resolve(self, href: str) -> str | None:
        """Absolute, normalised http(s) URL for ``href``, or None when it is not a web link."""
        try:
            return self.cache[href]
        except KeyError:
            url = self.cache[href] = self._resolve(href.strip(ASCII_WHITESPACE))
            return url

    def _resolve(self, href: str) -> str | None:
        if not href or href[0] == "#":
            return None
        fast = self._fast(href)
        return fast if fast is not None else _slow_resolve(self.base, href)

    def _fast(self, href: str) -> str | None:
        if "%" in href and _UNUSUAL_ESCAPE.search(href.split("#", 1)[0]):
            return None
        if href.startswith("http"):
            parts = _plain_absolute(href)
            return _joined(*parts) if parts else None
        if self.origin is None or href[0] in "?.\\" or href[:2] in ("//", "/\\"):
            return None
        if href[0] == "/":
            match, directory = _PATH.fullmatch(href), ""
        elif ":" in href.split("/", 1)[0] or "//" in href:
            return None  # a scheme (mailto:, javascript:, ...), or empty segments urljoin collapses
        else:
            match, directory = _PATH.fullmatch("/" + href), self.directory
        return _joined(self.origin + directory, match.group(1) or "/", match.group(2)) if match else None


def document_base(page_url: str, base_href: str | None) -> str:
    """The URL links resolve against: ``base_href`` (resolved against the page) when it is
    a web URL, else the page URL."""
    if base_href is None:
        return page_url
    candidate = urljoin(page_url, base_href.strip(ASCII_WHITESPACE))
    return candidate if candidate.split(":", 1)[0].lower() in WEB_SCHEMES else page_url


def normalise_text(text: str) -> str:
    return " ".join(text.split())


class LinkList:
    """The page's links in order, each URL once (first occurrence wins), at most ``limit``."""

    def __init__(self, resolver: Resolver, limit: int | None) -> None:
        self.resolver = resolver
        self.limit = limit
        self.links: list[Link] = []
        self.seen: set[str] = set()

    def new_url(self, href: str) -> str | None:
        """The URL of an anchor's ``href`` when it is a web link not seen yet on this page."""
        url = self.resolver.resolve(href)
        return None if url is None or url in self.seen else url

    def append(self, url: str, text: str) -> bool:
        """Add a link (a URL from :meth:`new_url`); False once the limit is reached (stop walking)."""
        self.seen.add(url)
        self.links.append(Link(url, text))
        return self.limit is None or len(self.links) < self.limit

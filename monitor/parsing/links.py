"""The link rules both parse engines share: what an anchor's URL and text are, which base
they resolve against, and how the page's list is kept (each URL once, where it first
appears, with the first text that is not empty; capped).

* URL: the ``href`` (for an SVG ``<a>`` without one, ``xlink:href``: browsers follow both)
  resolved against the document base, kept when it is http(s), fragment dropped,
  normalised by :func:`monitor.urls.normalize`.
* Text: what a browser shows inside the anchor, whitespace-normalised, cut to
  ``MAX_LINK_TEXT`` characters; never the content of ``<script>``, ``<style>`` or ``<template>``.
  (Anchors nested in SVG each hold their descendants' text: uncut, a 19 KB page made
  2.5 MB of link text.)
* Length: a URL longer than ``MAX_STRING`` characters is not a link anyone publishes.
* Credentials: ``user:password@`` is dropped from every link (a relative link on a watch
  with credentials in its URL would otherwise carry them into the store and alerts).
* Base: the first ``<base href>`` outside any ``<template>``, resolved against the page URL.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable
from urllib.parse import urljoin

from monitor.messages import MAX_LINK_TEXT, MAX_STRING
from monitor.urls import (NORMAL_PATH, WEB_SCHEMES, BadURL, has_unusual_escape, join_normal, normal_parts, normalize,
                          without_userinfo)

ASCII_WHITESPACE = " \t\n\r\f"
HIDDEN_TEXT = frozenset({"script", "style", "template"})



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
        return without_userinfo(normalize(url))
    except (BadURL, ValueError):
        return None


class Resolver:
    """Resolves the hrefs of one page against its base, each distinct href once.

    Most hrefs on real pages are plain absolute, root-relative or relative URLs already in
    normal form (:func:`monitor.urls.normal_parts`); they are joined as strings. Everything
    else goes through ``urljoin`` and :func:`normalize` (the fast path is tested to agree).
    """

    def __init__(self, base: str) -> None:
        base = without_userinfo(base)  # urljoin would copy a watch URL's credentials into every relative link
        self.base = base
        self.cache: dict[str, str | None] = {}
        parts = normal_parts(base)
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
        if href.startswith("http"):
            parts = normal_parts(href)
            return join_normal(*parts) if parts else None
        if has_unusual_escape(href):
            return None
        if self.origin is None or href[0] in "?.\\" or href[:2] in ("//", "/\\"):
            return None
        if href[0] == "/":
            match, directory = NORMAL_PATH.fullmatch(href), ""
        elif ":" in href.split("/", 1)[0] or "//" in href:
            return None  # a scheme (mailto:, javascript:, ...), or empty segments urljoin collapses
        else:
            match, directory = NORMAL_PATH.fullmatch("/" + href), self.directory
        return join_normal(self.origin + directory, match.group(1) or "/", match.group(2)) if match else None


def document_base(page_url: str, base_href: str | None) -> str:
    """The URL links resolve against: ``base_href`` (resolved against the page) when it is
    a web URL, else the page URL."""
    if base_href is None:
        return page_url
    candidate = urljoin(page_url, base_href.strip(ASCII_WHITESPACE))
    return candidate if candidate.split(":", 1)[0].lower() in WEB_SCHEMES else page_url


def normalise_text(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str) -> str:
    return text if len(text) <= MAX_LINK_TEXT else text[:MAX_LINK_TEXT].rstrip()


class LinkList:
    """The page's links in order, each URL once (where it first appears), at most ``limit``.

    A link's text is the first one that is not empty: a teaser image linking to a story
    usually comes before the headline linking to it, and the headline is what a person
    (and the noise rule, :mod:`monitor.filters`) reads."""

    def __init__(self, resolver: Resolver, limit: int | None) -> None:
        self.resolver = resolver
        self.limit = limit
        self.links: list[Link] = []
        self.seen: set[str] = set()
        self.untitled: dict[str, int] = {}  # URL -> position of its link, while its text is empty

    def add(self, href: str, text: Callable[[], str]) -> bool:
        """Add the link of an anchor's ``href`` (``text`` is called only when the text is
        needed); False once the limit is reached (stop walking)."""
        url = self.resolver.resolve(href)
        if url is None or len(url) > MAX_STRING:
            return True
        if url in self.seen:
            if url in self.untitled:
                found = text()
                if found:
                    self.links[self.untitled.pop(url)] = Link(url, _cut(found))
            return True
        self.seen.add(url)
        found = text()
        if not found:
            self.untitled[url] = len(self.links)
        self.links.append(Link(url, _cut(found)))
        return self.limit is None or len(self.links) < self.limit

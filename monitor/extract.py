"""Turn a fetched page into its links, the way a browser would see them.

1. :func:`decode_html` picks the character encoding in the browser's order: byte order
   mark, HTTP ``charset``, ``<meta charset>`` in the first 1024 bytes, then sniffing.
   A declaration that cannot decode the bytes (a lying charset) is passed over.
2. :func:`extract_links` parses with html5lib (the HTML5 algorithm, so unclosed ``<li>``,
   ``<p>`` or ``<a>`` nest as in a browser), walks the DOM breadth-first and returns every
   ``<a href>`` once: absolute http(s), fragment dropped, text whitespace-normalised.
"""
from __future__ import annotations

import codecs
import re
from collections import deque
from dataclasses import dataclass
from urllib.parse import urljoin

from bs4 import BeautifulSoup, Tag

from monitor.urls import WEB_SCHEMES, BadURL, normalize

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_:.\-]+)""", re.IGNORECASE)
# The WHATWG encoding standard maps these labels to windows-1252.
_WINDOWS_1252_ALIASES = {"iso8859-1", "ascii", "cp1252"}
_ASCII_WHITESPACE = " \t\n\r\f"


@dataclass(frozen=True)
class Link:
    url: str
    text: str

    def as_dict(self) -> dict[str, str]:
        return {"url": self.url, "text": self.text}


def _codec_name(label: str | None) -> str | None:
    """Python codec for a charset label, or None when the label is unknown."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name
    except LookupError:
        return None
    return "cp1252" if name in _WINDOWS_1252_ALIASES else name


def _try_decode(body: bytes, codec: str) -> str | None:
    try:
        return body.decode(codec)
    except UnicodeDecodeError:
        if codec == "cp1252":  # undefined bytes: decode the way browsers do
            return body.decode("latin-1")
        return None


def _looks_utf8(body: bytes) -> bool:
    """Non-ASCII bytes that form valid UTF-8 are, in practice, never a legacy encoding."""
    if body.isascii():
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decode_html(body: bytes, http_charset: str | None = None) -> str:
    """Decode a page body to text, choosing the encoding as a browser does."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(codec, errors="replace")
    meta = _META_CHARSET.search(body[:1024])
    declared = [_codec_name(http_charset), _codec_name(meta.group(1).decode("ascii", "replace") if meta else None)]
    for codec in filter(None, declared):
        if codec.startswith("utf-16"):
            codec = "utf-8"  # a <meta> or header claiming UTF-16 without a BOM is ignored by browsers
        if codec != "utf-8" and _looks_utf8(body):
            codec = "utf-8"
        text = _try_decode(body, codec)
        if text is not None:
            return text
    if _looks_utf8(body) or body.isascii():
        return body.decode("utf-8")
    return _try_decode(body, "cp1252") or body.decode("utf-8", errors="replace")


def _resolve(base: str, href: str) -> str | None:
    """Absolute, normalised http(s) URL for ``href``, or None when it is not a web link."""
    href = href.strip(_ASCII_WHITESPACE)
    if not href or href.startswith("#"):
        return None
    if ":" not in href.split("/", 1)[0] or href.lower().startswith(WEB_SCHEMES):
        href = href.replace("\\", "/")  # browsers read a backslash as a slash in web URLs
    try:
        url = urljoin(base, href)
        scheme = url.split(":", 1)[0].lower()
        if scheme not in WEB_SCHEMES:
            return None  # javascript:, mailto:, tel:, data:, ...
        return normalize(url)
    except (BadURL, ValueError):
        return None


def _text(anchor: Tag) -> str:
    return " ".join(anchor.get_text(" ").split())


def _document_base(soup: BeautifulSoup, page_url: str) -> str:
    """The first ``<base href>`` outside any ``<template>`` (resolved against the page URL)."""
    base = next((tag for tag in soup.find_all("base", href=True) if tag.find_parent("template") is None), None)
    if base is None:
        return page_url
    candidate = urljoin(page_url, base["href"].strip(_ASCII_WHITESPACE))
    return candidate if candidate.split(":", 1)[0].lower() in WEB_SCHEMES else page_url


def parse(html: str) -> BeautifulSoup:
    """Parse with the HTML5 algorithm (html5lib), as a browser would."""
    return BeautifulSoup(html, "html5lib")


def links_in(soup: BeautifulSoup, page_url: str, limit: int | None = None) -> list[Link]:
    """Every ``<a href>`` of the parsed page, breadth-first, each URL once (first occurrence wins).

    Anchors inside ``<template>`` are skipped: browsers never render template content.
    """
    base = _document_base(soup, page_url)
    seen: set[str] = set()
    found: list[Link] = []
    queue: deque[Tag] = deque([soup])
    while queue:
        node = queue.popleft()
        for child in node.children:
            if not isinstance(child, Tag) or child.name == "template":
                continue
            if child.name == "a" and child.has_attr("href"):
                url = _resolve(base, child["href"])
                if url is not None and url not in seen:
                    seen.add(url)
                    found.append(Link(url, _text(child)))
                    if limit is not None and len(found) >= limit:
                        return found
            queue.append(child)
    return found


def extract_links(body: bytes, page_url: str, http_charset: str | None = None, limit: int | None = None,
                  engine: str = "html5lib") -> list[Link]:
    """Decode, parse and collect the links of a page body fetched from ``page_url``."""
    return links_in(parse(decode_html(body, http_charset)), page_url, limit)

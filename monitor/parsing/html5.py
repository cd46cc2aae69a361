"""The reference engine: html5lib builds the tree (the WHATWG algorithm in pure Python),
a breadth-first walk over BeautifulSoup's view of it collects the anchors."""
from __future__ import annotations

from collections import deque

from bs4 import BeautifulSoup, CData, NavigableString, Tag

from monitor.parsing.links import HIDDEN_TEXT, Link, LinkList, Resolver, document_base, normalise_text

MATHML = "http://www.w3.org/1998/Math/MathML"
SVG = "http://www.w3.org/2000/svg"
_SHOWN_STRINGS = (NavigableString, CData)  # exact types: comments and doctypes are strings too


def _text(tag: Tag) -> str:
    parts: list[str] = []

    def collect(node: Tag) -> None:
        for child in node.children:
            if type(child) in _SHOWN_STRINGS:
                parts.append(child)
            elif isinstance(child, Tag) and child.name not in HIDDEN_TEXT:
                collect(child)
    collect(tag)
    return normalise_text(" ".join(parts))


def _href(anchor: Tag) -> str | None:
    href = anchor.get("href")
    if href is None and anchor.namespace == SVG:
        href = anchor.get("xlink:href")
    return href


def _base_href(soup: BeautifulSoup) -> str | None:
    base = next((tag for tag in soup.find_all("base", href=True) if tag.find_parent("template") is None), None)
    return None if base is None else base["href"]


def extract(html: str, page_url: str, limit: int | None) -> list[Link]:
    """Every link of the page, breadth-first (see :mod:`monitor.parsing`)."""
    soup = BeautifulSoup(html, "html5lib")
    links = LinkList(Resolver(document_base(page_url, _base_href(soup))), limit)
    queue: deque[Tag] = deque([soup])
    while queue:
        for child in queue.popleft().children:
            if not isinstance(child, Tag) or child.name == "template":
                continue
            if child.name == "a" and child.namespace != MATHML:
                href = _href(child)
                url = None if href is None else links.new_url(href)
                if url is not None and not links.append(url, _text(child)):
                    return links.links
            queue.append(child)
    return links.links

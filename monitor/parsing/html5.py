"""The reference engine: html5lib builds the tree (the WHATWG algorithm in pure Python),
a breadth-first walk over BeautifulSoup's view of it collects the anchors (of the regions a
selector matches, found by BeautifulSoup's soupsieve, when the watch has one)."""
from __future__ import annotations

from collections import deque

from bs4 import BeautifulSoup, CData, NavigableString, Tag

from monitor.parsing.links import HIDDEN_TEXT, Link, LinkList, Resolver, document_base, normalise_text
from monitor.parsing.regions import NoRegion

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


def _regions(soup: BeautifulSoup, selector: str | None) -> list[Tag]:
    """The outermost elements ``selector`` matches outside template content, in document
    order (the whole document without a selector); NoRegion when there are none."""
    if selector is None:
        return [soup]
    regions: list[Tag] = []
    for region in soup.select(selector):
        # soupsieve returns matches in document order: a region is nested only in the last one kept.
        parents = list(region.parents)
        if not any(parent.name == "template" for parent in parents) and \
                not (regions and any(parent is regions[-1] for parent in parents)):
            regions.append(region)
    if not regions:
        raise NoRegion(selector)
    return regions


def _walk(region: Tag, links: LinkList) -> bool:
    """Add the links of ``region`` (itself included), breadth-first; False once the limit is reached.
    A ``<template>`` region has none: its content is not on the page."""
    queue: deque[Tag] = deque([] if region.name == "template" else [region])
    while queue:
        element = queue.popleft()
        if element.name == "a" and element.namespace != MATHML:
            href = _href(element)
            if href is not None and not links.add(href, lambda: _text(element)):
                return False
        queue.extend(child for child in element.children if isinstance(child, Tag) and child.name != "template")
    return True


def extract(html: str, page_url: str, limit: int | None, selector: str | None = None) -> list[Link]:
    """Every link of the page, or of the regions ``selector`` matches, breadth-first (see
    :mod:`monitor.parsing` and :mod:`monitor.parsing.regions`)."""
    soup = BeautifulSoup(html, "html5lib")
    links = LinkList(Resolver(document_base(page_url, _base_href(soup))), limit)
    for region in _regions(soup, selector):
        if not _walk(region, links):
            break
    return links.links

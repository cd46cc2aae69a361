"""A watch's CSS selector: only the links inside the regions it matches count.

Both engines read a selector the same way: the elements it matches are the regions, in
document order; a region inside an earlier one adds nothing (its links are the outer one's);
regions inside ``<template>`` content are not on the page. Each region is walked
breadth-first like a whole page (a matched ``<a>`` is a link itself), and a link found in
two regions is kept once, where it was first found.

Selectors are judged by soupsieve, the selector engine of the reference parser (BeautifulSoup):
what it refuses is refused at ``monitor watch add/set`` with its reason. The fast engine
(lexbor) reads simple selectors (types, classes, ids, attributes, combinators) as soupsieve
does, but some functional pseudo-classes otherwise (``:is(nav, main) a``): a selector with
one, or one lexbor refuses, sends the page to the reference engine (see
:func:`monitor.parsing.extract_links`).
"""
from __future__ import annotations

from monitor.messages import MAX_SELECTOR


class BadSelector(ValueError):
    """A selector soupsieve cannot read; ``str(error)`` is the one-line reason."""


class NoRegion(Exception):
    """The selector matched nothing on the page."""

    def __init__(self, selector: str) -> None:
        super().__init__(f"selector {selector!r} matched nothing on the page")


def check_selector(selector: str) -> str:
    """``selector`` when it is a CSS selector soupsieve reads, at most ``MAX_SELECTOR``
    characters; BadSelector with a one-line reason otherwise."""
    if not selector.strip():
        raise BadSelector("an empty selector matches nothing")
    if len(selector) > MAX_SELECTOR:
        raise BadSelector(f"a selector is at most {MAX_SELECTOR} characters")
    import soupsieve  # imported on first use: most commands and most watches need no selector

    try:
        soupsieve.compile(selector)
    except soupsieve.SelectorSyntaxError as exc:
        raise BadSelector(f"bad selector {selector!r}: {str(exc).splitlines()[0]}") from None
    return selector

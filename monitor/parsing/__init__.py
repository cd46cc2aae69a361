"""Turn a fetched page into its links, the way a browser would see them.

:func:`extract_links` decodes the body (:mod:`monitor.parsing.decode`), parses it with the
WHATWG HTML5 tree-construction algorithm (so unclosed ``<li>``, ``<p>`` or ``<a>`` nest as
in a browser), and returns every ``<a href>`` once, breadth-first: absolute http(s),
fragment dropped, text whitespace-normalised (the rules: :mod:`monitor.parsing.links`); with a
watch's CSS selector, only those inside the regions it matches (:mod:`monitor.parsing.regions`).

Two engines implement the algorithm and give identical link lists (a differential test
over real pages and generated malformed markup holds them to it):

* ``lexbor`` (:mod:`monitor.parsing.lexbor`, C through selectolax): the default, ~30x faster;
* ``html5lib`` (:mod:`monitor.parsing.html5`, pure Python): the reference, and the
  fallback for any page the fast engine fails on.
"""
from __future__ import annotations

from typing import Callable

from monitor.parsing import lexbor
from monitor.parsing.decode import decode_html
from monitor.parsing.links import Link
from monitor.parsing.regions import BadSelector, NoRegion, check_selector

Engine = Callable[[str, str, "int | None", "str | None"], list[Link]]


def _html5lib(html: str, page_url: str, limit: int | None, selector: str | None = None) -> list[Link]:
    # Imported on first use: bs4 and html5lib take longer to import than most commands run.
    from monitor.parsing import html5
    return html5.extract(html, page_url, limit, selector)


ENGINES: dict[str, Engine] = {"lexbor": lexbor.extract, "html5lib": _html5lib}

__all__ = ["ENGINES", "BadSelector", "Link", "NoRegion", "decode_html", "extract_links"]


def extract_links(body: bytes, page_url: str, http_charset: str | None = None, limit: int | None = None,
                  engine: str = "lexbor", selector: str | None = None) -> list[Link]:
    """Decode, parse and collect the links of a page body fetched from ``page_url`` (only
    those inside the regions ``selector`` matches, when given: NoRegion when it matches
    nothing, BadSelector when it cannot be read)."""
    if selector is not None:
        check_selector(selector)
        if "(" in selector:
            # Functional pseudo-classes (:is(), :where(), :not(), :nth-child() ...): lexbor reads
            # some of them otherwise than soupsieve (`:is(nav, main) a`), and silently.
            engine = "html5lib"
    html = decode_html(body, http_charset)
    try:
        return ENGINES[engine](html, page_url, limit, selector)
    except NoRegion:
        raise  # the reference engine would find no region either
    except Exception:
        if engine == "html5lib":
            raise
        return _html5lib(html, page_url, limit, selector)

"""The fast engine (lexbor) gives exactly the reference engine's (html5lib) links: URL,
text and breadth-first order, on every page of the shared corpus and on generated
malformed markup that exercises the corners of the HTML5 tree-construction algorithm; and
for a watch's CSS selector (lexbor's selector engine against soupsieve), the same links of
the same regions on every corpus page.

Where html5lib 1.1 (2020) predates the current standard, lexbor follows the standard and
browsers, and the two cannot agree; the generator keeps these apart, and the tests at the
end pin what browsers do. html5lib lets an ``<a>`` or a block element inside ``<template>``
close elements outside it (an open ``<a>`` or ``<p>``: template is no scope boundary there),
mishandles a ``<template>`` left open or closed across other elements, reads ``</p>`` or
``</br>`` inside SVG/MathML the old way, and drops ``<select>`` content (since 2025 the
standard parses it like any other content). None of these occurred on the corpus's pages.
"""
from __future__ import annotations

import random

import pytest

from monitor.parsing import ENGINES, NoRegion, decode_html
from tests.test_corpus import PAGES, page_url

SEED = 20261122
DOCUMENTS = 1500

# Free-form pieces, opened and closed at random: implied end tags (p, li, dt, dd, option),
# misnested formatting (adoption agency, <font> reconstruction), table content (foster
# parenting), nested and unclosed <a>.
OPENERS = ["<p>", "<li>", "<ul>", "<ol>", "<div>", "<span>", "<b>", "<i>", "<font color=red>", "<em>", "<table>",
           "<tr>", "<td>", "<th>", "<tbody>", "<caption>", "<dl>", "<dt>", "<dd>", "<h2>", "<section>", "<nav>",
           "<noscript>", "<object>", "<button>", "<form>", "<article>", "<header>", "<pre>", "<a name=x>"]
CLOSERS = ["</p>", "</li>", "</ul>", "</div>", "</span>", "</b>", "</i>", "</font>", "</a>", "</table>", "</tr>",
           "</td>", "</section>", "</h2>", "</x>", "</body>", "</html>"]
TEXTS = ["news", " spaced  out ", "Caf&eacute; &amp; more", "&copy=1", "a < b", "\u00a0nbsp\u00a0", "<!-- c -->",
         "<script>var s = '<a href=/in-script>';</script>", "<style>.a{color:red}</style>", "<br>", "<img src=x alt=y>"]
HREFS = ["/a", "b", "../c", "?q=1", "#frag", "", "https://other.example/x", "HTTP://Other.Example:80/Y",
         "//cdn.example/z", "javascript:void(0)", "mailto:x@example.org", "/d?x=1&amp;y=2", "/e#f", "\\g",
         "/caf\u00e9", "/%7euser", "/./h", "/i/../j", " /k "]
# Balanced blocks: template content, SVG and MathML content with their integration points.
BLOCKS = ["<template>{a}<span>{a}</span></template>", "<svg>{a}<g>{a}</g></svg>", "<svg><foreignObject>{a}</foreignObject></svg>",
          "<math>{a}</math>", "<math><mtext>{a}</mtext><mi>{a}</mi></math>",
          "<math><annotation-xml encoding='text/html'>{a}</annotation-xml></math>"]


def _anchor(rng: random.Random, closed: bool = False) -> str:
    attribute = rng.choice(["href", "href", "href", "xlink:href", "HREF"])
    tag = f"<a {attribute}>" if rng.random() < 0.05 else f'<a {attribute}="{rng.choice(HREFS)}">'
    return tag + rng.choice(TEXTS) + ("</a>" if closed or rng.random() < 0.6 else "")


def generate(rng: random.Random) -> str:
    """A random document of the pieces above (and sometimes a ``<base href>``). A block
    starts with no ``<a>`` open: how an open ``<a>`` meets a nested one inside template or
    foreign content is where html5lib 1.1 and the current standard part ways."""
    parts = []
    if rng.random() < 0.3:
        parts.append(f"<base href='{rng.choice(['/base/', 'https://base.example/', 'mailto:x', ''])}'>")
    anchor_open = False
    for _ in range(rng.randint(3, 40)):
        roll = rng.random()
        if roll < 0.6:
            piece = rng.choice([OPENERS, CLOSERS, TEXTS][int(roll * 5) % 3])
        elif roll < 0.7:
            piece = ("</a>" if anchor_open else "") + rng.choice(BLOCKS).replace("{a}", _anchor(rng, closed=True))
        else:
            piece = _anchor(rng)
        parts.append(piece)
        if "<a" in piece or "</a>" in piece:
            anchor_open = piece.rfind("<a") > piece.rfind("</a>")
    return "".join(parts)


def _pairs(engine: str, html: str, url: str) -> list[tuple[str, str]]:
    return [(link.url, link.text) for link in ENGINES[engine](html, url, None)]


@pytest.mark.parametrize("path", PAGES, ids=[path.name for path in PAGES])
def test_both_engines_give_the_same_links_on_real_pages(path) -> None:
    html = decode_html(path.read_bytes())
    assert _pairs("lexbor", html, page_url(path)) == _pairs("html5lib", html, page_url(path))


def test_both_engines_give_the_same_links_on_malformed_markup() -> None:
    rng = random.Random(SEED)
    url = "https://example.com/dir/page.html"
    with_links = 0
    for _ in range(DOCUMENTS):
        html = generate(rng)
        reference = _pairs("html5lib", html, url)
        assert _pairs("lexbor", html, url) == reference, f"the engines differ on: {html!r}"
        with_links += bool(reference)
    assert with_links > DOCUMENTS // 2, "the generator must produce documents with links"


# What watches select on real pages: landmarks, ids and classes, attribute and structural
# pseudo-classes, combinators, regions that nest and anchors matched themselves.
SELECTORS = ["main, #content, .content, article, section section", "nav, footer, [class*=teaser]",
             "li:nth-child(2n+1) > a, h2 > a, div:not([class]) > a[href^='/']", "div"]


def _selected(engine: str, html: str, url: str, selector: str) -> list[tuple[str, str]] | str:
    """The selected links, or the error a selector matching nothing raises."""
    try:
        return [(link.url, link.text) for link in ENGINES[engine](html, url, None, selector)]
    except NoRegion as exc:
        return str(exc)


@pytest.mark.parametrize("path", PAGES, ids=[path.name for path in PAGES])
def test_both_engines_select_the_same_regions_on_real_pages(path) -> None:
    html = decode_html(path.read_bytes())
    for selector in SELECTORS:
        assert _selected("lexbor", html, page_url(path), selector) == \
            _selected("html5lib", html, page_url(path), selector), selector


def test_the_selectors_find_links_on_most_corpus_pages() -> None:
    """The parity test above compares links, not only "matched nothing" on both sides."""
    for selector in SELECTORS:
        found = sum(isinstance(_selected("lexbor", decode_html(path.read_bytes()), page_url(path), selector), list)
                    for path in PAGES)
        assert found > len(PAGES) // 3, f"{selector!r} matched on {found} pages only"


@pytest.mark.parametrize("html, expected", [
    ("<a href=/x><template><a href=/in-template>t</a></template>", ["/x"]),
    ("<template><form></template><a href=/after>a</a>", ["/after"]),
    ("<svg></p><a href=/after>a</a>", ["/after"]),
    ("<p><template><div><a href=/in-template>t</a></div></template>", []),
])
def test_where_html5lib_predates_the_standard_the_fast_engine_does_what_browsers_do(html, expected) -> None:
    urls = [url.removeprefix("https://example.com") for url, _ in _pairs("lexbor", html, "https://example.com/")]
    assert urls == expected

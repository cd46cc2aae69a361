"""Link extraction as a browser sees the page (``monitor.parsing``).

Every case goes through ``extract_links(body_bytes, page_url, http_charset)``: decoding,
HTML5 parsing and the breadth-first link walk together, once with each parse engine.
"""
from __future__ import annotations

import codecs

import pytest

from monitor.parsing import ENGINES, BadSelector, NoRegion, decode_html, extract_links

PAGE = "https://example.com/dir/page.html"
engine = "lexbor"


@pytest.fixture(autouse=True, params=sorted(ENGINES))
def each_engine(request: pytest.FixtureRequest) -> None:
    """Run every test of this module with each parse engine."""
    global engine
    engine = request.param


def links(html: str | bytes, page_url: str = PAGE, http_charset: str | None = None,
          limit: int | None = None, selector: str | None = None) -> list[tuple[str, str]]:
    """``(url, text)`` pairs extracted from ``html`` (str bodies are sent as UTF-8)."""
    body = html.encode("utf-8") if isinstance(html, str) else html
    return [(link.url, link.text)
            for link in extract_links(body, page_url, http_charset, limit=limit, engine=engine, selector=selector)]


def urls(html: str | bytes, page_url: str = PAGE, selector: str | None = None) -> list[str]:
    return [url for url, _ in links(html, page_url, selector=selector)]


# --- malformed HTML, parsed the HTML5 way ------------------------------------------------------
def test_unclosed_list_items() -> None:
    html = "<ul><li><a href=/a>First<li><a href=/b>Second<li><a href=/c>Third</ul>"
    assert links(html) == [("https://example.com/a", "First"), ("https://example.com/b", "Second"),
                           ("https://example.com/c", "Third")]


def test_unclosed_paragraphs() -> None:
    html = "<p>Intro <a href=/1>one</a><p>More <a href=/2>two</a><p>end"
    assert links(html) == [("https://example.com/1", "one"), ("https://example.com/2", "two")]


def test_unclosed_anchor_does_not_swallow_the_next_paragraph() -> None:
    """The HTML5 parser reopens the unclosed <a> inside the next <p>; the first text wins."""
    assert links("<p><a href=/x>link text<p>after") == [("https://example.com/x", "link text")]


def test_nested_anchor_closes_the_outer_one() -> None:
    html = "<a href=/outer>Outer <a href=/inner>Inner</a> tail</a>"
    assert links(html) == [("https://example.com/outer", "Outer"), ("https://example.com/inner", "Inner")]


def test_anchor_in_a_table_is_foster_parented() -> None:
    html = "<table><a href=/fostered>f</a><tr><td><a href=/cell>c</a></td></tr></table>"
    assert urls(html) == ["https://example.com/fostered", "https://example.com/cell"]


# --- <base href> and URL resolution -----------------------------------------------------------
def test_relative_base_resolves_against_the_page() -> None:
    assert urls("<head><base href='/base/'></head><a href=rel>r</a>") == ["https://example.com/base/rel"]


def test_absolute_base() -> None:
    assert urls("<head><base href='https://other.org/b/'></head><a href=rel>r</a>") == ["https://other.org/b/rel"]


def test_only_the_first_base_counts() -> None:
    html = "<head><base href='https://first.org/'><base href='https://second.org/'></head><a href=x>x</a>"
    assert urls(html) == ["https://first.org/x"]


def test_base_without_href_is_passed_over() -> None:
    html = "<head><base target=_blank><base href='https://second.org/'></head><a href=x>x</a>"
    assert urls(html) == ["https://second.org/x"]


def test_non_web_base_is_ignored() -> None:
    assert urls("<base href='mailto:x@example.com'><a href=x>x</a>") == ["https://example.com/dir/x"]


@pytest.mark.parametrize("href, expected", [
    ("sibling", "https://example.com/dir/sibling"),
    ("../up", "https://example.com/up"),
    ("/root", "https://example.com/root"),
    ("?q=1", "https://example.com/dir/page.html?q=1"),
    ("//cdn.example.net/x", "https://cdn.example.net/x"),
    ("//cdn.example.net", "https://cdn.example.net/"),
    ("HTTP://Other.ORG:80/Path", "http://other.org/Path"),
    ("  /padded\n", "https://example.com/padded"),
    ("/a\nb", "https://example.com/ab"),               # tabs and newlines inside a URL are dropped
])
def test_relative_and_protocol_relative_links(href: str, expected: str) -> None:
    assert urls(f"<a href='{href}'>x</a>") == [expected]


def test_protocol_relative_link_takes_the_page_scheme() -> None:
    assert urls("<a href='//cdn.example.net/x'>x</a>", page_url="http://example.com/") == ["http://cdn.example.net/x"]


# --- entities and text -------------------------------------------------------------------------
def test_entities_in_href_and_text() -> None:
    html = "<a href='/t?a=1&amp;b=2&#x26;c=3'>Caf&eacute; &#x2014; Tom &amp; Jerry</a>"
    assert links(html) == [("https://example.com/t?a=1&b=2&c=3", "Café — Tom & Jerry")]


def test_legacy_entity_before_equals_sign_is_not_decoded_in_href() -> None:
    """HTML5: ``&copy=`` in an attribute stays as written (a query parameter, not ©)."""
    assert urls("<a href='/s?a=1&copy=2'>x</a>") == ["https://example.com/s?a=1&copy=2"]


def test_text_whitespace_is_normalised() -> None:
    html = "<a href=/w>\n   Breaking:\t<b>big</b>   news<br>today&nbsp; </a>"
    assert links(html) == [("https://example.com/w", "Breaking: big news today")]


def test_text_is_what_a_browser_shows_never_script_style_or_template() -> None:
    html = ("<a href=/logo><svg><style>.c{fill:red}</style><title>Logo</title></svg>Home"
            "<script>track()</script><template>tpl</template><!-- note --></a>")
    assert links(html) == [("https://example.com/logo", "Logo Home")]


def test_mathml_anchor_is_not_a_link_but_html_inside_mathml_text_is() -> None:
    html = "<math><a href=/math>m</a><mtext><a href=/text>t</a></mtext></math><a href=/html>h</a>"
    assert urls(html) == ["https://example.com/html", "https://example.com/text"]


def test_svg_anchor_with_href_or_xlink_href_is_a_link() -> None:
    html = "<svg><a href=/svg>s</a><a xlink:href=/xlink>x</a></svg><a xlink:href=/html-xlink>no</a>"
    assert urls(html) == ["https://example.com/svg", "https://example.com/xlink"]


def test_valueless_href_is_not_a_link() -> None:
    assert urls("<a href>self</a><a href=/kept>kept</a>") == ["https://example.com/kept"]


def test_image_only_link_has_empty_text() -> None:
    assert links("<a href=/img><img src=x.png alt='Alt'></a>") == [("https://example.com/img", "")]


def test_a_link_takes_the_first_text_that_is_not_empty_where_it_first_appears() -> None:
    html = ("<article><a href=/story><img src=teaser.jpg></a><h2><a href=/story>The headline</a></h2>"
            "<p><a href=/story>Read more</a></p></article><a href=/other>Other</a>")
    assert links(html) == [("https://example.com/other", "Other"), ("https://example.com/story", "The headline")]


# --- what is not a web link ---------------------------------------------------------------------
@pytest.mark.parametrize("href", [
    "javascript:void(0)", "JavaScript:alert(1)", "java\nscript:alert(1)", "mailto:news@example.com",
    "tel:+4930123456", "data:text/html,<b>x</b>", "ftp://example.com/file", "#top", "#", "",
])
def test_non_web_links_are_skipped(href: str) -> None:
    assert links(f"<a href='{href}'>x</a><a href=/kept>kept</a>") == [("https://example.com/kept", "kept")]


def test_anchor_without_href_is_skipped() -> None:
    assert urls("<a name=top>top</a><a href=/kept>kept</a>") == ["https://example.com/kept"]


def test_fragment_is_dropped() -> None:
    assert urls("<a href='/story#comments'>x</a>") == ["https://example.com/story"]


def test_duplicates_kept_once_first_text_wins() -> None:
    html = "<a href=/x>first</a><a href='/x#again'>second</a><a href='https://EXAMPLE.com:443/x'>third</a>"
    assert links(html) == [("https://example.com/x", "first")]


def test_anchors_inside_template_are_ignored() -> None:
    html = "<template><a href=/hidden>hidden</a><div><a href=/deeper>d</a></div></template><a href=/shown>shown</a>"
    assert urls(html) == ["https://example.com/shown"]


def test_a_base_inside_template_is_ignored() -> None:
    assert urls("<template><base href='https://evil.org/'></template><a href=x>x</a>") == ["https://example.com/dir/x"]


@pytest.mark.parametrize("href, expected", [
    ("/\\other.org/news", "https://other.org/news"),
    ("a\\b", "https://example.com/dir/a/b"),
])
def test_backslashes_read_as_slashes(href: str, expected: str) -> None:
    assert urls(f"<a href='{href}'>x</a>") == [expected]


def test_a_link_to_an_invalid_host_is_skipped() -> None:
    assert urls("<a href='http://exa mple.com/'>bad</a><a href=/ok>ok</a>") == ["https://example.com/ok"]


# --- order and limit ------------------------------------------------------------------------------
def test_breadth_first_order() -> None:
    """A shallow link after a deeply nested one in source order comes first."""
    html = ("<div><div><div><div><a href=/deep>deep</a></div></div></div></div>"
            "<a href=/shallow>shallow</a><div><a href=/middle>middle</a></div>")
    assert urls(html) == ["https://example.com/shallow", "https://example.com/middle", "https://example.com/deep"]


def test_same_depth_keeps_source_order() -> None:
    html = "".join(f"<a href=/{n}>{n}</a>" for n in range(5))
    assert urls(html) == [f"https://example.com/{n}" for n in range(5)]


def test_limit() -> None:
    html = "".join(f"<a href=/{n}>{n}</a>" for n in range(10))
    assert links(html, limit=3) == [(f"https://example.com/{n}", str(n)) for n in range(3)]


def test_limit_counts_distinct_links() -> None:
    html = "<a href=/a>a</a><a href=/a>again</a><a href=/b>b</a><a href=/c>c</a>"
    assert links(html, limit=2) == [("https://example.com/a", "a"), ("https://example.com/b", "b")]


# --- a watch's CSS selector: only the links inside the regions it matches -------------------------
REGIONS = ("<nav><a href=/nav>Nav</a></nav>"
           "<main><div><div><a href=/deep>Deep</a></div></div><a href=/top>Top</a>"
           "<section id=latest><a href=/latest>Latest</a><a href=/top>Top again</a></section></main>"
           "<aside id=more><a href=/aside>Aside</a><a class=lead href=/lead>Lead</a></aside>"
           "<footer><a href=/imprint>Imprint</a></footer>")


def paths(html: str, selector: str) -> list[str]:
    return [url.removeprefix("https://example.com") for url in urls(html, selector=selector)]


def test_only_links_inside_the_regions_breadth_first_in_each() -> None:
    assert paths(REGIONS, "main") == ["/top", "/latest", "/deep"]
    assert paths(REGIONS, "footer, nav") == ["/nav", "/imprint"], "regions in document order, not selector order"


def test_a_region_inside_another_adds_nothing_and_no_link_comes_twice() -> None:
    assert paths(REGIONS, "#latest, main") == ["/top", "/latest", "/deep"]
    assert links(REGIONS, selector="#latest, #more")[:2] == [("https://example.com/latest", "Latest"),
                                                            ("https://example.com/top", "Top again")]
    assert paths(REGIONS, "div") == ["/deep"]


def test_a_matched_anchor_is_a_link_itself() -> None:
    assert paths(REGIONS, "a.lead, footer a") == ["/lead", "/imprint"]


def test_template_content_is_no_region() -> None:
    html = "<template><main><a href=/hidden>h</a></main></template><main><a href=/shown>s</a></main>"
    assert paths(html, "main") == ["/shown"]
    assert paths(html, "template") == [], "the template matched: its content is not on the page"


def test_a_selector_matching_nothing_says_so() -> None:
    with pytest.raises(NoRegion, match="selector 'article, #gone' matched nothing on the page"):
        urls(REGIONS, selector="article, #gone")
    assert urls("<main><p>no links here</p></main>", selector="main") == [], "a region without links is no error"


def test_a_selector_soupsieve_cannot_read_is_refused_before_parsing() -> None:
    with pytest.raises(BadSelector, match=r"bad selector 'main\[': "):
        urls(REGIONS, selector="main[")


def test_the_limit_counts_links_across_regions() -> None:
    assert paths(REGIONS, "nav, #latest, footer") == ["/nav", "/latest", "/top", "/imprint"]
    assert links(REGIONS, limit=2, selector="nav, #latest, footer") == [("https://example.com/nav", "Nav"),
                                                                         ("https://example.com/latest", "Latest")]


# --- decoding ------------------------------------------------------------------------------------
LINK_CAFE = "<a href='/caf\u00e9'>Caf\u00e9</a>"
EXPECTED_CAFE = [("https://example.com/caf%C3%A9", "Café")]


@pytest.mark.parametrize("body", [
    codecs.BOM_UTF8 + LINK_CAFE.encode("utf-8"),
    codecs.BOM_UTF16_LE + LINK_CAFE.encode("utf-16-le"),
    codecs.BOM_UTF16_BE + LINK_CAFE.encode("utf-16-be"),
], ids=["utf-8", "utf-16-le", "utf-16-be"])
def test_byte_order_mark_decides_and_is_removed(body: bytes) -> None:
    assert links(body, http_charset="iso-8859-1") == EXPECTED_CAFE
    assert not decode_html(body, "iso-8859-1").startswith("\ufeff")


def test_http_charset() -> None:
    assert links(LINK_CAFE.encode("iso-8859-1"), http_charset="ISO-8859-1") == EXPECTED_CAFE
    assert decode_html("привет".encode("koi8-r"), "koi8-r") == "привет"


def test_quoted_http_charset() -> None:
    assert decode_html("привет".encode("cp1251"), '"windows-1251"') == "привет"


def test_one_bad_byte_keeps_a_utf8_page_utf8() -> None:
    """Browsers decode with the declared encoding and show U+FFFD for a byte that does not
    fit; switching the page to cp1252 would turn every non-ASCII link into a new URL."""
    body = '<meta charset="utf-8"><a href="/wiki/Größe">Größe</a> '.encode("utf-8") + b"\xff"
    for http_charset in (None, "utf-8"):
        assert links(body, http_charset=http_charset) == [("https://example.com/wiki/Gr%C3%B6%C3%9Fe", "Größe")]
        assert decode_html(body, http_charset).endswith("</a> \ufffd")


def test_meta_charset() -> None:
    body = b'<meta charset="iso-8859-15">' + "<p>\u20ac 5</p>".encode("iso-8859-15")
    assert decode_html(body).endswith("<p>€ 5</p>")


def test_meta_http_equiv_content_type() -> None:
    body = (b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
            + "<a href=/x>привет</a>".encode("cp1251"))
    assert links(body) == [("https://example.com/x", "привет")]


def test_http_charset_wins_over_meta() -> None:
    body = b'<meta charset="windows-1251">' + "<p>привет</p>".encode("koi8-r")
    assert decode_html(body, "koi8-r").endswith("<p>привет</p>")


def test_meta_beyond_the_first_1024_bytes_is_not_read() -> None:
    body = b"<!--" + b"x" * 1100 + b'--><meta charset="koi8-r"><p>' + "привет".encode("koi8-r")
    assert "привет" not in decode_html(body)


def test_lying_utf8_charset_on_latin1_bytes_is_read_as_declared() -> None:
    assert decode_html(b"caf\xe9", "utf-8") == "caf\ufffd"  # what a browser shows


def test_lying_latin1_charset_on_utf8_bytes() -> None:
    assert decode_html("café".encode("utf-8"), "iso-8859-1") == "café"
    assert links(LINK_CAFE.encode("utf-8"), http_charset="iso-8859-1") == EXPECTED_CAFE


def test_meta_claiming_utf16_without_bom_is_read_as_utf8() -> None:
    assert decode_html(b'<meta charset="utf-16"><p>caf\xc3\xa9') == '<meta charset="utf-16"><p>café'


def test_missing_charset_with_windows_1252_bytes() -> None:
    assert decode_html(b"\x93quoted\x94") == "\u201cquoted\u201d"


def test_latin1_label_means_windows_1252() -> None:
    """WHATWG: iso-8859-1 and us-ascii are windows-1252, so 0x80 is the euro sign."""
    assert decode_html(b"\x80 10", "iso-8859-1") == "€ 10"
    assert decode_html(b"\x80 10", "us-ascii") == "€ 10"


def test_missing_charset_with_utf8_bytes() -> None:
    assert decode_html("naïve – ok".encode("utf-8")) == "naïve – ok"


@pytest.mark.parametrize("body", [
    b"\xc3\x28 abc \x93 \x81\x8d\x8f\x90\x9d",
    b"\xa0\xa1\xff" * 100,
    codecs.BOM_UTF8 + b"\xc3\x28\xff",
    codecs.BOM_UTF16_LE + b"a",        # odd length after a UTF-16 BOM
    b"\x00\x01\x02<a href=/x>x</a>",
])
@pytest.mark.parametrize("charset", [None, "utf-8", "shift_jis", "utf-16", "no-such-charset"])
def test_invalid_bytes_never_raise(body: bytes, charset: str | None) -> None:
    assert isinstance(decode_html(body, charset), str)
    extract_links(body, PAGE, charset)


def test_link_text_is_bounded_even_for_anchors_nested_in_svg() -> None:
    """bs4 and lexbor give each SVG <a> all its descendants' text: uncut, nested anchors
    made megabytes of link data from a few KB of page."""
    depth = 200
    html = "<svg>" + "".join(f'<a href="/{n}">{"word " * 20}' for n in range(depth)) + "</a>" * depth + "</svg>"
    found = links(html)
    assert len(found) == depth and max(len(text) for _, text in found) <= 300 < len("word " * 20 * depth)


def test_a_url_longer_than_2048_characters_is_not_a_link() -> None:
    assert urls(f'<a href="/{"a" * 2100}">long</a><a href="/short">short</a>') == ["https://example.com/short"]

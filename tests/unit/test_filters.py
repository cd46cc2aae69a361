"""Filter rules: which new links are alerted (``monitor.filters``), the noise rule's site
furniture judged on a real SQLite store."""
from __future__ import annotations

import time

import pytest

from monitor.filters import Rule, SitePages, compile_pattern, for_watch, pointless_text, site
from monitor.generic_texts import fold
from monitor.store import CheckResult, LinkRecord, open_store

PAGE = "https://www.bbc.co.uk/news"


def _filter(*rules: tuple[str, str], watch_id: int = 1, tag: str | None = "news"):
    return for_watch([Rule(n, rule, pattern, None, None) for n, (rule, pattern) in enumerate(rules)], watch_id, tag, PAGE)


def test_words_match_anywhere_case_insensitively_and_slashes_make_a_regex() -> None:
    assert compile_pattern("Election").search("the ELECTION results")
    assert compile_pattern("/^brexit\\b/").search("Brexit: what next") and not compile_pattern("/^brexit/").search("on Brexit")
    with pytest.raises(ValueError, match="bad regular expression"):
        compile_pattern("/[/")
    with pytest.raises(ValueError, match="empty pattern"):
        compile_pattern("  ")


def test_each_rule_holds_back_what_it_says() -> None:
    include = _filter(("include", "election"))
    assert include.held_back("https://www.bbc.co.uk/1", "Election night") is None
    assert include.held_back("https://www.bbc.co.uk/election/2", "Results") is None, "the URL counts too"
    assert include.held_back("https://www.bbc.co.uk/3", "Weather") == "no include rule matches"
    assert _filter(("exclude", "/sport(s)?/")).held_back("https://www.bbc.co.uk/sport/1", "Match") == "exclude '/sport(s)?/'"
    assert _filter(("url-deny", "/live/")).held_back("https://www.bbc.co.uk/live/9", "x") == "url-deny '/live/'"
    assert _filter(("url-allow", "/articles/")).held_back("https://www.bbc.co.uk/video/1", "x") == "no url-allow rule matches"
    same = _filter(("same-site", ""))
    assert same.held_back("https://news.bbc.co.uk/story", "x") is None, "another host of the same registrable domain"
    assert same.held_back("https://www.theguardian.com/x", "x") == "same-site: theguardian.com is not bbc.co.uk"
    assert not _filter(), "no rules: nothing is held back"


def test_rules_apply_globally_by_tag_and_by_watch() -> None:
    rules = [Rule(1, "exclude", "a", None, None), Rule(2, "exclude", "b", None, "news"), Rule(3, "exclude", "c", 7, None)]
    assert [rule.id for rule, _ in for_watch(rules, 7, "news", PAGE).exclude] == [1, 2, 3]
    assert [rule.id for rule, _ in for_watch(rules, 8, None, PAGE).exclude] == [1]


def test_a_site_is_its_registrable_domain_or_its_host() -> None:
    assert site("https://a.b.example.co.uk/x") == "example.co.uk"
    assert site("http://127.0.0.1:8000/") == "127.0.0.1" and site("http://localhost/") == "localhost"


# --- the noise rule: links whose text says nothing, and site furniture ------------------------------
@pytest.mark.parametrize("text", [
    "more", "Read more »", "READ MORE...", "Continue reading →", "Weiterlesen", "mehr", "weiter", "Mehr erfahren ›",
    "Lire la suite", "plus", "suite", "En savoir plus", "Leer más", "leer mas", "Ver más", "Continua", "Leggi tutto",
    "Lees meer", "lees verder", "Leia mais", "Saiba mais", "Zurück", "Précédent",
])
def test_generic_texts_in_each_language_say_nothing(text: str) -> None:
    assert pointless_text(text) == f"generic text {text!r}"


@pytest.mark.parametrize("text, reason", [
    ("", "no text"), ("  \n ", "no text"), ("»", "no words in its text '»'"), ("→", "no words in its text '→'"),
    ("...", "no words in its text '...'"), ("| ›", "no words in its text '| ›'"),
])
def test_empty_texts_and_texts_of_only_punctuation_or_arrows_say_nothing(text: str, reason: str) -> None:
    assert pointless_text(text) == reason


@pytest.mark.parametrize("text", [
    "More than 100 dead in floods", "Weiter Streit um den Haushalt", "Plus de 100 morts", "Read more books, says minister",
    "2024", "Ü-30 Party",
])
def test_headlines_that_contain_a_generic_word_are_news(text: str) -> None:
    assert pointless_text(text) is None


def test_folding_drops_case_accents_punctuation_and_extra_spaces() -> None:
    assert fold("  LEER  Más…  »") == "leer mas" and fold("Zurück!") == "zuruck" and fold("→ » |") == ""


def test_the_noise_rule_holds_back_pointless_texts_after_the_other_rules() -> None:
    noise = _filter(("noise", ""))
    assert noise and noise.held_back("https://www.bbc.co.uk/1", "Read more") == "noise: generic text 'Read more'"
    assert noise.held_back("https://www.bbc.co.uk/2", "Floods in the north") is None
    assert _filter(("noise", ""), ("url-deny", "/live/")).held_back("https://www.bbc.co.uk/live/1", "") == \
        "url-deny '/live/'"


SITE = "https://news.example"


@pytest.fixture
def site_store(tmp_path):
    """A store watching six pages of news.example and one of another site, knowing some links."""
    store = open_store(tmp_path / "db.sqlite3")
    known = {"/a": ["/contact", "/story-a"], "/b": ["/contact", "/imprint"], "/c": ["/contact", "/imprint"],
             "/d": ["/story-d"], "/e": [], "/f": []}
    for path, links in known.items():
        watch = store.add_watch(SITE + path, 300)
        store.record_results([CheckResult(watch.id, 1.0, "ok", 200, 5, [
            LinkRecord(SITE + link, link, f"c{n}", 1.0) for n, link in enumerate(links)], {})])
    other = store.add_watch("https://other.example/", 300)
    store.record_results([CheckResult(other.id, 1.0, "ok", 200, 5, [LinkRecord(SITE + "/imprint", "x", "c", 1.0)], {})])
    yield store
    store.close()


def test_a_link_on_most_of_a_sites_watched_pages_is_site_furniture(site_store) -> None:
    pages = SitePages(site_store)
    assert pages.furniture(SITE + "/contact", SITE + "/d") == "site-wide link: on 4 of 6 watched pages of news.example"
    assert pages.furniture(SITE + "/contact", SITE + "/new") == "site-wide link: on 4 of 7 watched pages of news.example", \
        "an unwatched page of the site (monitor check) counts itself"
    assert pages.furniture(SITE + "/imprint", SITE + "/a") is None, "on 3 of 6 pages: half is no majority"
    assert pages.furniture(SITE + "/story-a", SITE + "/d") is None, "on 2 pages only"
    assert pages.furniture(SITE + "/imprint", "https://other.example/") is None, "a site of one watched page"
    rule = for_watch([Rule(1, "noise", "", None, None)], 4, None, SITE + "/d", pages)
    assert rule.held_back(SITE + "/contact", "Contact") == "noise: site-wide link: on 4 of 6 watched pages of news.example"
    assert for_watch([Rule(1, "noise", "", None, None)], 4, None, SITE + "/d").held_back(SITE + "/contact", "Contact") \
        is None, "without the site's pages only the text is judged"


def test_an_expression_that_backtracks_without_end_times_out_and_the_link_is_alerted():
    """(a|aa)+$ on 40 a's and a "!" would take re longer than the universe has; a site may
    well write such a text, and the processor must go on."""
    text, url = "a" * 40 + "!", "https://news.example/a"
    started = time.monotonic()
    assert _filter(("exclude", "/(a|aa)+$/")).held_back(url, text) is None, "not excluded: alerted"
    assert _filter(("include", "/(a|aa)+$/")).held_back(url, text) is None, "as if included: alerted"
    assert time.monotonic() - started < 5
    assert _filter(("exclude", "/(a|aa)+$/")).held_back(url, "aaaa") == "exclude '/(a|aa)+$/'", "a short text matches"

"""Filter rules: which new links are alerted (``monitor.filters``)."""
from __future__ import annotations

import pytest

from monitor.filters import Rule, compile_pattern, for_watch, site

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

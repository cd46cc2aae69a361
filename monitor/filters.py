"""Which new links are alerted: keyword and URL rules, global, per tag and per watch.

Rules (``monitor filter add RULE [PATTERN] [--watch ID | --tag T]``):

* ``include PATTERN``: alert only links whose text or URL matches an include rule (once a
  watch is under any include rule);
* ``exclude PATTERN``: never alert a link whose text or URL matches;
* ``url-allow PATTERN`` / ``url-deny PATTERN``: the same two, on the URL alone;
* ``same-site``: alert only links on the watched page's own site, by registrable domain
  (``www.bbc.co.uk`` and ``news.bbc.co.uk`` are one site; an IP address or a single-label
  host is its own site).

A PATTERN is words, found case-insensitively anywhere in the text or URL, or a regular
expression written ``/like this/`` (case-insensitive too). A rule holds back an alert,
never a link: a held-back link is recorded as known like any other, so adding, changing or
removing a rule never floods anyone with old links.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

RULES = ("include", "exclude", "url-allow", "url-deny", "same-site")
NEEDS_PATTERN = {"include", "exclude", "url-allow", "url-deny"}


@dataclass(frozen=True)
class Rule:
    id: int
    rule: str
    pattern: str
    watch_id: int | None
    tag: str | None

    def applies_to(self, watch_id: int, tag: str | None) -> bool:
        return (self.watch_id is None and self.tag is None) or self.watch_id == watch_id or \
            (tag is not None and self.tag == tag)


def compile_pattern(pattern: str) -> re.Pattern:
    """Words, or ``/a regular expression/``, as a case-insensitive search; ValueError with
    a one-line reason for a bad expression."""
    if len(pattern) > 2 and pattern.startswith("/") and pattern.endswith("/"):
        try:
            return re.compile(pattern[1:-1], re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"bad regular expression {pattern!r}: {exc}") from None
    if not pattern.strip():
        raise ValueError("an empty pattern matches everything: give words or /a regular expression/")
    return re.compile(re.escape(pattern.strip()), re.IGNORECASE)


@lru_cache(maxsize=4096)
def site(url: str) -> str:
    """The registrable domain of ``url``'s host (its host when it has none: an IP address,
    ``localhost``), by the public suffix list bundled with tldextract (never fetched)."""
    host = (urlsplit(url).hostname or "").rstrip(".")
    return _extract()(host).top_domain_under_public_suffix or host


@lru_cache(maxsize=1)
def _extract():
    import tldextract  # imported on first use: it loads the public suffix list

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


class LinkFilter:
    """The rules that apply to one watch, compiled; :meth:`held_back` judges a link."""

    def __init__(self, rules: list[Rule], page_url: str) -> None:
        self.page_url = page_url
        self.include = [(rule, compile_pattern(rule.pattern)) for rule in rules if rule.rule == "include"]
        self.exclude = [(rule, compile_pattern(rule.pattern)) for rule in rules if rule.rule == "exclude"]
        self.allow = [(rule, compile_pattern(rule.pattern)) for rule in rules if rule.rule == "url-allow"]
        self.deny = [(rule, compile_pattern(rule.pattern)) for rule in rules if rule.rule == "url-deny"]
        self.same_site = any(rule.rule == "same-site" for rule in rules)

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude or self.allow or self.deny or self.same_site)

    def held_back(self, url: str, text: str) -> str | None:
        """Why the link is not to be alerted (the rule, in one line), or None."""
        for rule, pattern in self.exclude:
            if pattern.search(text) or pattern.search(url):
                return f"exclude {rule.pattern!r}"
        for rule, pattern in self.deny:
            if pattern.search(url):
                return f"url-deny {rule.pattern!r}"
        if self.include and not any(p.search(text) or p.search(url) for _, p in self.include):
            return "no include rule matches"
        if self.allow and not any(p.search(url) for _, p in self.allow):
            return "no url-allow rule matches"
        if self.same_site and site(url) != site(self.page_url):
            return f"same-site: {site(url) or 'no host'} is not {site(self.page_url)}"
        return None


def for_watch(rules: list[Rule], watch_id: int, tag: str | None, page_url: str) -> LinkFilter:
    """The filter of one watch: the global rules, its tag's and its own."""
    return LinkFilter([rule for rule in rules if rule.applies_to(watch_id, tag)], page_url)

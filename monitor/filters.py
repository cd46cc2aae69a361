"""Which new links are alerted: keyword and URL rules, global, per tag and per watch.

Rules (``monitor filter add RULE [PATTERN] [--watch ID | --tag T]``):

* ``include PATTERN``: alert only links whose text or URL matches an include rule (once a
  watch is under any include rule);
* ``exclude PATTERN``: never alert a link whose text or URL matches;
* ``url-allow PATTERN`` / ``url-deny PATTERN``: the same two, on the URL alone;
* ``same-site``: alert only links on the watched page's own site, by registrable domain
  (``www.bbc.co.uk`` and ``news.bbc.co.uk`` are one site; an IP address or a single-label
  host is its own site);
* ``noise``: never alert a link whose text says nothing (empty, only punctuation or arrows,
  or generic: "read more", "weiter", "lire la suite", ... :mod:`monitor.generic_texts`),
  nor site furniture: a link already known on at least ``FURNITURE_PAGES`` of the watched
  pages of the page's site, and on more than half of them (navigation, footers). The second
  needs the links of the site's other watches (:class:`SitePages`): a link a site adds to
  every page at once is alerted on the pages checked before it is known on enough others.

A PATTERN is words, found case-insensitively anywhere in the text or URL, or a regular
expression written ``/like this/`` (case-insensitive too). A rule holds back an alert,
never a link: a held-back link is recorded as known like any other, so adding, changing or
removing a rule never floods anyone with old links.

Expressions run on text the watched sites write, so one that backtracks without end (a
``/(a|aa)+$/`` meeting a long run of a's) must not stall the processor: each search has
``MATCH_SECONDS`` (the ``regex`` engine's timeout), and a search that runs out of time
counts the way that alerts the link (an exclude rule did not match, an include rule did).
"""
from __future__ import annotations

import time

import regex
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol
from urllib.parse import urlsplit

from monitor.generic_texts import GENERIC, fold

RULES = ("include", "exclude", "url-allow", "url-deny", "same-site", "noise")
NEEDS_PATTERN = {"include", "exclude", "url-allow", "url-deny"}
FURNITURE_PAGES = 3  # a link on fewer of a site's watched pages is never site furniture
SITE_PAGES_TTL = 60.0  # seconds the grouping of watches by site is reused (a new watch counts after this)


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


MATCH_SECONDS = 0.05  # a rule's search of one link's text or URL (300 and 2,048 characters at most)


def compile_pattern(pattern: str) -> regex.Pattern:
    """Words, or ``/a regular expression/``, as a case-insensitive search; ValueError with
    a one-line reason for a bad expression."""
    if len(pattern) > 2 and pattern.startswith("/") and pattern.endswith("/"):
        try:
            return regex.compile(pattern[1:-1], regex.IGNORECASE | regex.VERSION0)  # (the syntax of re)
        except (regex.error, OverflowError, RecursionError) as exc:  # (deep nesting recurses)
            raise ValueError(f"bad regular expression {pattern[:100]!r}: {exc}") from None
    if not pattern.strip():
        raise ValueError("an empty pattern matches everything: give words or /a regular expression/")
    return regex.compile(regex.escape(pattern.strip()), regex.IGNORECASE)


def _found(pattern: regex.Pattern, *texts: str) -> bool | None:
    """Whether ``pattern`` is in any of ``texts``; None when it ran out of time."""
    try:
        return any(pattern.search(text, timeout=MATCH_SECONDS) for text in texts)
    except TimeoutError:
        return None


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


def pointless_text(text: str) -> str | None:
    """Why a link text says nothing about where the link goes (one line), or None."""
    if not text.strip():
        return "no text"
    folded = fold(text)
    if not folded:
        return f"no words in its text {text!r}"
    if folded in GENERIC:
        return f"generic text {text!r}"
    return None


class LinkStore(Protocol):
    """What :class:`SitePages` reads of the store (:class:`monitor.store.Store`)."""

    def watch_urls(self) -> list[tuple[int, str]]: ...

    def watches_knowing(self, url: str, watch_ids: list[int]) -> int: ...


class SitePages:
    """The watched pages of each site and the links known on them: what tells site furniture
    (navigation, footers: on most of a site's pages) from a page's own links. Reads the
    store's links table (one indexed look-up per watch of the site), so it needs nothing
    kept in memory across restarts; the grouping of watches by site is reused for
    ``SITE_PAGES_TTL`` seconds."""

    def __init__(self, store: LinkStore) -> None:
        self.store = store
        self.by_site: dict[str, list[tuple[int, str]]] = {}
        self.sites: dict[str, str] = {}  # watched page URL -> its site
        self.grouped_at = -SITE_PAGES_TTL

    def furniture(self, url: str, page_url: str) -> str | None:
        """Why ``url`` (comparable form), a link of ``page_url``, is site furniture, or None."""
        if time.monotonic() - self.grouped_at >= SITE_PAGES_TTL:
            self.by_site = {}
            for watch_id, watch_url in self.store.watch_urls():
                if watch_url not in self.sites:  # (site() is cached too, but for fewer URLs than a big list)
                    self.sites[watch_url] = site(watch_url)
                self.by_site.setdefault(self.sites[watch_url], []).append((watch_id, watch_url))
            self.grouped_at = time.monotonic()
        page_site = site(page_url)
        others = [watch_id for watch_id, watch_url in self.by_site.get(page_site, []) if watch_url != page_url]
        pages = len(others) + 1  # the page itself, watched or not
        if pages < FURNITURE_PAGES:
            return None
        found_on = 1 + self.store.watches_knowing(url, others)
        if found_on >= FURNITURE_PAGES and 2 * found_on > pages:
            return f"site-wide link: on {found_on} of {pages} watched pages of {page_site}"
        return None


class LinkFilter:
    """The rules that apply to one watch, compiled; :meth:`held_back` judges a link."""

    def __init__(self, rules: list[Rule], page_url: str, site_pages: SitePages | None = None) -> None:
        self.page_url = page_url
        self.site_pages = site_pages
        self.include = [(rule, compile_pattern(rule.pattern)) for rule in rules if rule.rule == "include"]
        self.exclude = [(rule, compile_pattern(rule.pattern)) for rule in rules if rule.rule == "exclude"]
        self.allow = [(rule, compile_pattern(rule.pattern)) for rule in rules if rule.rule == "url-allow"]
        self.deny = [(rule, compile_pattern(rule.pattern)) for rule in rules if rule.rule == "url-deny"]
        self.same_site = any(rule.rule == "same-site" for rule in rules)
        self.noise = any(rule.rule == "noise" for rule in rules)

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude or self.allow or self.deny or self.same_site or self.noise)

    def held_back(self, url: str, text: str) -> str | None:
        """Why the link is not to be alerted (the rule, in one line), or None."""
        # (_found is None when a search ran out of time: as if the link's rule said "alert it".)
        for rule, pattern in self.exclude:
            if _found(pattern, text, url):
                return f"exclude {rule.pattern!r}"
        for rule, pattern in self.deny:
            if _found(pattern, url):
                return f"url-deny {rule.pattern!r}"
        if self.include and not any(_found(p, text, url) is not False for _, p in self.include):
            return "no include rule matches"
        if self.allow and not any(_found(p, url) is not False for _, p in self.allow):
            return "no url-allow rule matches"
        if self.same_site and site(url) != site(self.page_url):
            return f"same-site: {site(url) or 'no host'} is not {site(self.page_url)}"
        if self.noise:
            reason = pointless_text(text) or (self.site_pages and self.site_pages.furniture(url, self.page_url))
            return f"noise: {reason}" if reason else None
        return None


def for_watch(rules: list[Rule], watch_id: int, tag: str | None, page_url: str,
              site_pages: SitePages | None = None) -> LinkFilter:
    """The filter of one watch: the global rules, its tag's and its own (a noise rule judges
    site furniture only with ``site_pages``)."""
    return LinkFilter([rule for rule in rules if rule.applies_to(watch_id, tag)], page_url, site_pages)

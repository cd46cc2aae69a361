"""URL normalisation, watch-target validation, the private-address guard and redaction."""
from __future__ import annotations

import socket

import pytest

from monitor.urls import (BadURL, Unresolvable, check_public, comparable, is_link_local, is_public_address, normalize,
                         redact, validate_watch_url, renewing_params)


# --- normalize ---------------------------------------------------------------------------
@pytest.mark.parametrize("url, expected", [
    ("HTTP://Example.COM/Path", "http://example.com/Path"),          # path case is kept
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("https://example.com:80/a", "https://example.com:80/a"),        # not the default for https
    ("http://example.com:8080/a", "http://example.com:8080/a"),
    ("https://example.com/a#section-2", "https://example.com/a"),
    ("https://example.com/a?x=1#y", "https://example.com/a?x=1"),
    ("https://example.com", "https://example.com/"),
    ("https://example.com?q=1", "https://example.com/?q=1"),
    ("https://BÜCHER.example/pfad", "https://xn--bcher-kva.example/pfad"),
    ("https://example.com/search?b=2&a=1", "https://example.com/search?b=2&a=1"),  # order kept
    ("https://example.com/café", "https://example.com/caf%C3%A9"),
    ("https://example.com/a b", "https://example.com/a%20b"),
    ("https://example.com/?q=ü", "https://example.com/?q=%C3%BC"),
    ("http://[::1]:80/", "http://[::1]/"),
    ("  https://example.com/a  ", "https://example.com/a"),
])
def test_normalize(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize("url", [
    "HTTP://Example.COM:80/a#frag",
    "https://BÜCHER.example/café?q=ü&r=a b",
    "https://example.com/a%20b/%7Euser",
    "https://user:p%40ss@example.com:8443/x?y",
    "http://[2001:DB8::1]:8080/",
])
def test_normalize_is_idempotent(url: str) -> None:
    once = normalize(url)
    assert normalize(once) == once


def test_normalize_keeps_existing_percent_escapes() -> None:
    assert normalize("https://example.com/a%20b") == "https://example.com/a%20b"


@pytest.mark.parametrize("a, b", [
    ("https://example.com/%e2%82%ac", "https://example.com/%E2%82%AC"),
    ("https://example.com/%7Euser?q=%7e", "https://example.com/~user?q=~"),
    ("https://example.com/caf\u00e9", "https://example.com/caf%C3%A9"),
])
def test_normalize_makes_percent_escapes_uniform(a: str, b: str) -> None:
    """The same link spelled with other escapes gets the same code: no false "new link"."""
    assert normalize(a) == normalize(b)


def test_normalize_rejects_a_host_with_spaces() -> None:
    with pytest.raises(BadURL, match="invalid host name"):
        normalize("http://exa mple.com/")


def test_normalize_rejects_an_invalid_port() -> None:
    with pytest.raises(BadURL, match="invalid port"):
        normalize("http://example.com:99999/")


# --- validate_watch_url -------------------------------------------------------------------
@pytest.mark.parametrize("url, message", [
    ("example.com", "has no scheme: write it as https://example.com"),
    ("//example.com/", "has no scheme"),
    ("www.example.org/news?page=2", "has no scheme: write it as https://www.example.org/news?page=2"),
    ("10.0.0.5:8080/", "has no scheme: write it as https://10.0.0.5:8080/"),
    ("javascript:alert(1)", "unsupported scheme 'javascript'"),  # no https://javascript:alert(1) advice
    ("mailto:news@example.org", "unsupported scheme 'mailto'"),
    ("not a url", "is not a web address: write it as https://host/path"),
    ("ftp://example.com/", "unsupported scheme 'ftp'"),
    ("file:///etc/passwd", "unsupported scheme 'file'"),
    ("http://", "has no host"),
    ("http:///path", "has no host"),
    ("https://example.com/a b", "contains whitespace"),
    ("https://exa mple.com/", "contains whitespace"),
    ("", "empty URL"),
    ("   ", "empty URL"),
    ("http://[x/", "is not a valid URL: Invalid IPv6 URL"),  # urlsplit's ValueError was a traceback
    ("http://" + "a" * 64 + ".example/", "invalid host name"),  # a DNS label is at most 63 characters
    ("http://a..b/", "invalid host name"),
])
def test_validate_watch_url_refuses(url: str, message: str) -> None:
    with pytest.raises(BadURL) as info:
        validate_watch_url(url)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_validate_watch_url_returns_the_normalised_url() -> None:
    assert validate_watch_url(" HTTPS://Example.com:443#top ") == "https://example.com/"


# --- the private-address guard --------------------------------------------------------------
@pytest.mark.parametrize("address", [
    "127.0.0.1",
    "10.1.2.3",
    "192.168.1.1",
    "172.16.0.1",
    "169.254.169.254",   # cloud metadata
    "100.64.0.1",        # shared address space (carrier-grade NAT)
    "0.0.0.0",
    "224.0.0.1",
    "::1",
    "fe80::1",
    "fe80::1%eth0",
    "fc00::1",
    "::ffff:127.0.0.1",  # IPv4-mapped loopback
    "::ffff:10.0.0.1",
])
def test_non_public_addresses_are_refused(address: str) -> None:
    assert is_public_address(address) is False


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700::1", "::ffff:8.8.8.8"])
def test_public_addresses_are_accepted(address: str) -> None:
    assert is_public_address(address) is True


@pytest.mark.parametrize("address", [
    "169.254.169.254", "fe80::1",
    "::ffff:169.254.169.254",  # IPv4-mapped
    "64:ff9b::a9fe:a9fe",      # NAT64 (RFC 6052)
    "2002:a9fe:a9fe::1",       # 6to4
    "::a9fe:a9fe",             # IPv4-compatible (deprecated)
])
def test_every_form_of_a_link_local_address_is_link_local(address: str) -> None:
    """Cloud metadata is refused even with private targets allowed, however it is spelled."""
    assert is_link_local(address) and not is_public_address(address)


@pytest.mark.parametrize("url", ["http://[x/", "http://" + "a" * 64 + ".example/", "http://a:99999/"])
def test_check_public_turns_any_unparsable_url_into_bad_url(url: str) -> None:
    with pytest.raises(BadURL, match="not a valid URL|invalid"):
        check_public(url, allow_private=True)


@pytest.mark.parametrize("url, host", [("http://127.0.0.1/", "127.0.0.1"), ("http://localhost/", "localhost"),
                                       ("http://[::1]:8080/", "::1"), ("http://10.0.0.1/", "10.0.0.1")])
def test_check_public_refuses_local_targets(url: str, host: str) -> None:
    with pytest.raises(BadURL) as info:
        check_public(url)
    message = str(info.value)
    assert message.startswith(f"{host} resolves to non-public address")
    assert "MONITOR_ALLOW_PRIVATE=1" in message


# --- redact ---------------------------------------------------------------------------------
def test_redact_hides_the_password() -> None:
    redacted = redact("https://alice:s3cret@example.com/feed?x=1")
    assert redacted == "https://alice:***@example.com/feed?x=1"
    assert "s3cret" not in redacted


def test_redact_keeps_a_password_containing_at_sign_hidden() -> None:
    redacted = redact("https://alice:p@ss@example.com/")
    assert "p@ss" not in redacted
    assert redacted.endswith("@example.com/")


@pytest.mark.parametrize("url", ["https://example.com/a", "https://alice@example.com/"])
def test_redact_leaves_urls_without_password_alone(url: str) -> None:
    assert redact(url) == url


@pytest.mark.parametrize("normal, expected", [
    ("https://n.example/a", "https://n.example/a"),
    ("https://n.example/a?b=2&a=1", "https://n.example/a?a=1&b=2"),
    ("https://n.example/a?utm_source=x&UTM_Medium=y&fbclid=1&gclid=2&mc_cid=3&id=9", "https://n.example/a?id=9"),
    ("https://n.example/a?utm_source=x", "https://n.example/a"),
    ("https://n.example/a?ref=home&x", "https://n.example/a?ref=home&x"),
])
def test_comparable_drops_tracking_parameters_and_sorts_the_rest(normal: str, expected: str) -> None:
    assert comparable(normal) == expected


# --- volatile parameters: those that make every link new on every check ---------------------------
def _known(*urls: str):
    return lambda: list(urls)


def test_a_session_id_renewed_on_every_link_is_volatile() -> None:
    before = [f"https://n.example/story/{n}?sid=aaa" for n in range(4)]
    now = [f"https://n.example/story/{n}?sid=bbb" for n in range(4)]
    assert renewing_params(now, now, _known(*before)) == {"sid": 4}


def test_an_id_that_tells_articles_apart_is_not_volatile() -> None:
    known = [f"https://n.example/article?id={n}" for n in range(10)]
    current = [f"https://n.example/article?id={n}" for n in range(2, 12)]
    assert renewing_params(current[-2:], current, _known(*known)) == {}


def test_one_featured_slot_whose_id_changes_is_a_new_story_not_a_volatile_parameter() -> None:
    current = ["https://n.example/featured?id=8", "https://n.example/about"]
    assert renewing_params(current[:1], current, _known("https://n.example/featured?id=7",
                                                        "https://n.example/about")) == {}


def test_the_known_links_are_read_only_when_a_parameter_could_be_volatile() -> None:
    def unreadable():
        raise AssertionError("read the index for nothing")
    current = [f"https://n.example/a?id={n}&page=1" for n in range(3)] + ["https://n.example/a?id=0&page=2"]
    assert renewing_params(current[:2], current, unreadable) == {}


def test_a_reserved_name_is_never_asked_of_dns(monkeypatch) -> None:
    """``.example`` and ``.invalid`` never resolve (RFC 6761): no query leaves the machine."""
    def no_lookup(*args, **kwargs):
        raise AssertionError(f"DNS asked for {args[0]}")
    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    for url in ("https://news.example/", "http://shop.invalid./"):
        with pytest.raises(Unresolvable, match="reserved name"):
            check_public(url)


def test_a_parameter_on_links_that_stayed_is_not_renewing() -> None:
    """``?ref=home`` on every link, two of them new stories: most links with it stayed."""
    current = [f"https://n.example/story/{n}?ref=home" for n in range(12)]
    assert renewing_params(current[:2], current, _known(*current[2:])) == {}

"""The 6-character base62 codes that key the seen-link index (``monitor.codes``)."""
from __future__ import annotations

import string

import pytest

from monitor.codes import ALPHABET, LENGTH, shorten

SAMPLE_SIZE = 10_000


def sample_urls(count: int = SAMPLE_SIZE) -> list[str]:
    """Distinct, realistic-looking article URLs spread over a few hosts."""
    hosts = ("news.example", "www.example.org", "blog.example.net", "example.com")
    return [f"https://{hosts[n % len(hosts)]}/2024/{n % 12 + 1:02d}/story-{n}.html" for n in range(count)]


def test_alphabet_is_digits_then_lower_then_upper() -> None:
    assert ALPHABET == string.digits + string.ascii_lowercase + string.ascii_uppercase
    assert LENGTH == 6


@pytest.mark.parametrize("url", [
    "https://example.org/",
    "http://example.com/a?b=1",
    "https://xn--bcher-kva.example/caf%C3%A9",
    "",
])
def test_code_is_six_base62_characters(url: str) -> None:
    code = shorten(url)
    assert len(code) == 6
    assert set(code) <= set(ALPHABET)


def test_code_is_stable_across_calls() -> None:
    urls = sample_urls(100)
    assert [shorten(url) for url in urls] == [shorten(url) for url in urls]


def test_code_is_pinned_for_a_known_url() -> None:
    """Codes live in LevelDB keys and alert ids: changing the hash would re-alert every link."""
    assert shorten("https://example.org/") == "Yu35yr"


def test_code_depends_on_every_character() -> None:
    assert shorten("https://example.org/a") != shorten("https://example.org/b")
    assert shorten("https://example.org/") != shorten("https://example.org")


def test_collisions_are_rare_in_a_sample_of_ten_thousand() -> None:
    """62**6 codes: about 0.001 expected collisions among 10k URLs, so a few would already be a bug."""
    codes = [shorten(url) for url in sample_urls()]
    collisions = len(codes) - len(set(codes))
    assert collisions <= 2


def test_every_character_appears_in_every_position() -> None:
    """Codes use the whole alphabet at each position (about 160 hits per character expected)."""
    codes = [shorten(url) for url in sample_urls()]
    for position in range(LENGTH):
        assert {code[position] for code in codes} == set(ALPHABET), f"position {position}"

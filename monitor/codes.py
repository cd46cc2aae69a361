"""Six-character base62 codes for URLs, the key of the seen-link index.

62**6 = 5.7e10 codes, so collisions do happen at scale (about 9 pairs per million URLs);
the index stores the full URL beside each code and compares it (see ``linkindex``).
"""
from __future__ import annotations

import hashlib

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
LENGTH = 6
_SPACE = len(ALPHABET) ** LENGTH
# Every two-digit string, in order: a code is three of them (the processor shortens every
# link of every changed page, and three look-ups take half the time of six divisions).
_PAIRS = [high + low for high in ALPHABET for low in ALPHABET]
_PAIR_SPACE = len(_PAIRS)


def shorten(url: str) -> str:
    """Return the stable 6-character base62 code of ``url`` (pass it normalised)."""
    number = int.from_bytes(hashlib.sha256(url.encode("utf-8")).digest()[:8], "big") % _SPACE
    first, rest = divmod(number, _PAIR_SPACE * _PAIR_SPACE)
    second, third = divmod(rest, _PAIR_SPACE)
    return _PAIRS[first] + _PAIRS[second] + _PAIRS[third]

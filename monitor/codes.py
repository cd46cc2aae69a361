"""Six-character base62 codes for URLs, the key of the seen-link index.

62**6 = 5.7e10 codes, so collisions do happen at scale (about 9 pairs per million URLs);
the index stores the full URL beside each code and compares it (see ``linkindex``).
"""
from __future__ import annotations

import hashlib

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
LENGTH = 6
_SPACE = len(ALPHABET) ** LENGTH


def shorten(url: str) -> str:
    """Return the stable 6-character base62 code of ``url`` (pass it normalised)."""
    number = int.from_bytes(hashlib.sha256(url.encode("utf-8")).digest()[:8], "big") % _SPACE
    chars = []
    for _ in range(LENGTH):
        number, digit = divmod(number, len(ALPHABET))
        chars.append(ALPHABET[digit])
    return "".join(reversed(chars))

"""Decode a page body to text, choosing the encoding in the browser's order: byte order
mark, HTTP ``charset``, ``<meta charset>`` in the first 1024 bytes, then sniffing. The
declared encoding is kept even when some bytes do not fit it: they become U+FFFD, as in
browsers (switching the whole page to another encoding for one bad byte turned every
non-ASCII link into a new, wrong URL). One exception: bytes that are all valid UTF-8 are
read as UTF-8 whatever a legacy declaration says (mislabelled pages are common).

Both parse engines get text, never bytes (lexbor would assume UTF-8 for bytes).
"""
from __future__ import annotations

import codecs
import re

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_:.\-]+)""", re.IGNORECASE)
# The WHATWG encoding standard maps these labels to windows-1252.
_WINDOWS_1252_ALIASES = {"iso8859-1", "ascii", "cp1252"}


def _codec_name(label: str | None) -> str | None:
    """Python codec for a charset label, or None when the label is unknown."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name
    except LookupError:
        return None
    return "cp1252" if name in _WINDOWS_1252_ALIASES else name


def _decode_as(body: bytes, codec: str) -> str:
    try:
        return body.decode(codec)
    except UnicodeDecodeError:
        if codec == "cp1252":  # the five undefined bytes: decode the way browsers do
            return body.decode("latin-1")
        return body.decode(codec, errors="replace")


def _looks_utf8(body: bytes) -> bool:
    """Non-ASCII bytes that form valid UTF-8 are, in practice, never a legacy encoding."""
    if body.isascii():
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decode_html(body: bytes, http_charset: str | None = None) -> str:
    """Decode a page body to text, choosing the encoding as a browser does."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(codec, errors="replace")
    meta = _META_CHARSET.search(body[:1024])
    declared = [_codec_name(http_charset), _codec_name(meta.group(1).decode("ascii", "replace") if meta else None)]
    for codec in filter(None, declared):
        if codec.startswith("utf-16"):
            codec = "utf-8"  # a <meta> or header claiming UTF-16 without a BOM is ignored by browsers
        if codec != "utf-8" and _looks_utf8(body):
            codec = "utf-8"
        return _decode_as(body, codec)
    if _looks_utf8(body) or body.isascii():
        return body.decode("utf-8")
    return _decode_as(body, "cp1252")

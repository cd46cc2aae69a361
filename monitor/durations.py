"""Durations as users write them: ``30s``, ``5m``, ``2h``, ``1d``."""
from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PATTERN = re.compile(r"^\s*(-?)\s*([0-9]+)\s*([smhd])\s*$", re.ASCII)  # "-" only to refuse it clearly
MAXIMUM = 366 * 86400


def parse_duration(text: str, minimum: int = 1) -> int:
    """Return the number of seconds ``text`` denotes; raise ValueError with a readable reason."""
    shown = repr(text if len(text or "") <= 40 else text[:37] + "...")
    match = _PATTERN.match(text or "")
    if not match:
        raise ValueError(f"bad interval {shown}: write a number and a unit, e.g. 30s, 5m, 2h, 1d")
    sign, digits, unit = match.groups()
    digits = digits.lstrip("0") or "0"
    # Compared as text first: a hundred digits must not become a hundred-digit int to refuse.
    seconds = int(digits) * _UNITS[unit] if len(digits) <= 12 else MAXIMUM + 1
    if sign == "-" and seconds:
        seconds = -seconds
    if seconds < minimum:
        raise ValueError(f"bad interval {shown}: must be at least {format_duration(minimum)}")
    if seconds > MAXIMUM:
        raise ValueError(f"bad interval {shown}: must be at most 366d")
    return seconds


def format_duration(seconds: float) -> str:
    """Render seconds in the largest unit that divides them (``300`` -> ``5m``)."""
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def format_age(seconds: float | None) -> str:
    """Render an elapsed time for humans (``42s ago``, ``3h ago``); ``-`` for never."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"

"""What every ``monitor`` command shares: the two error kinds, output helpers, and the
validation of watch targets, intervals and references."""
from __future__ import annotations

import json
import time
import unicodedata

from monitor import config as configuration
from monitor.durations import parse_duration
from monitor.store import NotFound, Store
from monitor.urls import BadURL, Unresolvable, check_public, scrub_credentials, validate_watch_url


class UsageError(Exception):
    """Bad input from the user: exit code 2. Its message quotes the input, so any URL's
    password in it is masked (the CLI, the API and the pages show it)."""

    def __init__(self, message: str) -> None:
        super().__init__(scrub_credentials(message))


class RuntimeFailure(Exception):
    """Something outside the input failed (broker, supervisord, the network): exit code 1."""


def print_json(obj: dict) -> None:
    """One JSON object per line: the ``--json`` output of every command."""
    print(json.dumps(obj, ensure_ascii=False))


def ts(value: float | None) -> str:
    """A timestamp in local time, ``-`` for never."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value)) if value else "-"


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns, as wide as their widest cell."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]]
    return "\n".join(lines)


def watch_url(url: str, config: configuration.Config) -> tuple[str, str | None]:
    """Validate a watch target, including the private-address guard unless allowed.

    Returns the normalised URL and a warning when the host does not resolve right now: not
    fatal (DNS may be down for a moment, and every fetch checks the address again).
    """
    try:
        normalised = validate_watch_url(url)
        check_public(normalised, config.allow_private)
    except Unresolvable as exc:
        return normalised, f"{exc}; the address is checked again at every fetch"
    except BadURL as exc:
        raise UsageError(str(exc)) from None
    return normalised, None


def interval_seconds(text: str | None, config: configuration.Config) -> int:
    if text is None:
        return config.default_interval
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def find_watch(store: Store, ref: str):
    """A watch by id, or by URL as given or as `watch add` stores it (normalised)."""
    try:
        return store.find_watch(ref)
    except NotFound as exc:
        try:
            return store.find_watch(validate_watch_url(ref))
        except (BadURL, NotFound):
            raise UsageError(str(exc)) from None


def watch_id_of(store: Store, ref: str) -> int:
    return find_watch(store, ref).id


MAX_LABEL = 200  # characters of a watch's name or tag


def checked_label(field: str, value: str | None) -> str | None:
    """A new name or tag (``field``): None (unchanged) and '' (none) as they are, else at
    most MAX_LABEL characters on one line (UsageError otherwise)."""
    if value and len(value) > MAX_LABEL:
        raise UsageError(f"{field}: at most {MAX_LABEL} characters (got {len(value)})")
    if value and any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in value):
        raise UsageError(f"{field}: one line, without line breaks, tabs or control characters")
    return value


def scope(watch_id: int | None, tag: str | None) -> str:
    """Whose alerts a sink or a filter is for, in words."""
    return f"watch {watch_id}" if watch_id else f"tag {tag!r}" if tag else "every watch"


def cost(cost_ms: float | None) -> str:
    """A site's weight: its moving-average fetch time."""
    return "-" if cost_ms is None else f"{cost_ms:.0f} ms"

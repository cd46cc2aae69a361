"""Atom feeds of the alerts, written by the notifier under ``MONITOR_HOME/feeds``:
``all.atom``, ``watch-<id>.atom`` and ``tag-<tag>.atom``, the newest ``FEED_ENTRIES``
alerts each. A feed is written to a temporary file and renamed over the old one, so a
reader never sees half a feed. Built with ``feedgen`` (no hand-made XML).
"""
from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

from feedgen.feed import FeedGenerator

from monitor.store import Store
from monitor.urls import redact

FEED_ENTRIES = 200


def feed_name(watch_id: int | None = None, tag: str | None = None) -> str:
    """The file name of a feed: all alerts, one watch's or one tag's."""
    if watch_id is not None:
        return f"watch-{watch_id}.atom"
    if tag is not None:
        return "tag-" + re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".atom"
    return "all.atom"


def _moment(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, timezone.utc)


def render(title: str, name: str, alerts: list[dict], now: float) -> bytes:
    """One Atom document of ``alerts`` (newest first)."""
    feed = FeedGenerator()
    feed.id(f"urn:homepage-monitor:feed:{name}")
    feed.title(title)
    feed.author({"name": "homepage-monitor"})
    feed.updated(_moment(alerts[0]["first_seen"] if alerts else now))
    for alert in alerts:
        entry = feed.add_entry(order="append")
        entry.id(f"urn:homepage-monitor:alert:{alert['alert_id']}")
        entry.title(alert["text"] or alert["url"])
        entry.link(href=alert["url"])
        entry.published(_moment(alert["first_seen"]))
        entry.updated(_moment(alert["first_seen"]))
        entry.summary(f"New link on {alert['watch_name'] or redact(alert['baseUrl'])}")
    return feed.atom_str(pretty=True)


def write_feeds(store: Store, directory: Path, watch_ids: set[int], tags: set[str], now: float) -> int:
    """Rewrite ``all.atom`` and the feeds of ``watch_ids`` and ``tags``; return how many."""
    directory.mkdir(parents=True, exist_ok=True)
    scopes = [("All new links", None, None)]
    scopes += [(f"New links on watch {watch_id}", watch_id, None) for watch_id in sorted(watch_ids)]
    scopes += [(f"New links tagged {tag}", None, tag) for tag in sorted(tags)]
    for title, watch_id, tag in scopes:
        name = feed_name(watch_id, tag)
        path = directory / name
        draft = path.with_name(f".{name}.tmp")
        draft.write_bytes(render(title, name, store.recent_alerts(FEED_ENTRIES, watch_id, tag), now))
        os.replace(draft, path)
    return len(scopes)

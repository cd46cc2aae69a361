"""The seen-link index in LevelDB (plyvel), owned by one processor, plus its outbox.

Keys:

* ``L<watch id>:<code>``  -> JSON list of ``[url, first_seen]``: every URL with that 6-character
  code; a second URL under the same code is a collision and is still a new link.
* ``B<watch id>``         -> baseline marker: the watch's first successful check is done.
* ``O<sequence>``         -> outbox: the effects of one group of tasks (links, alerts, watch
  statuses) waiting to be applied to SQLite and the sinks.

The link keys, the baseline markers and the outbox entry of a group of tasks are written
in one synced batch, so after a crash the index and the outbox always agree: whatever the
index knows is either applied or still waiting in the outbox.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import plyvel

from monitor import codes


@dataclass(frozen=True)
class NewLink:
    url: str
    text: str
    code: str
    alert_id: str


def alert_id(watch_id: int, code: str, collision_index: int) -> str:
    """Deterministic alert id: watch id and link code, plus the position for a collision."""
    return f"{watch_id}-{code}" if collision_index == 0 else f"{watch_id}-{code}-{collision_index}"


class LinkIndex:
    def __init__(self, path: Path, shorten: Callable[[str], str] = codes.shorten) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Most look-ups are of links already known or of new ones: bloom filters answer "not
        # here" without reading a block, and the caches stay the same size however large the
        # index grows (memory flat from 0 to 10 million links and beyond).
        self.db = plyvel.DB(str(path), create_if_missing=True, bloom_filter_bits=10,
                            lru_cache_size=32 * 1024 * 1024, max_open_files=200)
        self.shorten = shorten
        last = next(self.db.iterator(prefix=b"O", reverse=True, include_value=False), b"O0")
        self._last_outbox = int(last[1:])

    def close(self) -> None:
        self.db.close()

    def forget(self, watch_ids: list[int]) -> int:
        """Delete the index entries and baseline markers of removed watches (one synced
        batch); return how many keys went."""
        deleted = 0
        with self.db.write_batch(sync=True) as batch:
            for watch_id in watch_ids:
                for key in self.db.iterator(prefix=b"L%d:" % watch_id, include_value=False):
                    batch.delete(key)
                    deleted += 1
                batch.delete(b"B%d" % watch_id)
        return deleted

    def is_baselined(self, watch_id: int) -> bool:
        return self.db.get(b"B%d" % watch_id) is not None

    def new_links(self, watch_id: int, links: list[tuple[str, str, str]],
                  pending: dict[bytes, list] | None = None) -> tuple[list[NewLink], dict[bytes, list]]:
        """The links never seen for this watch, and the index entries to write for them.
        Nothing is written here: see :meth:`commit`.

        Each link is ``(url, text, former)``: ``url`` in the form links are compared in
        (:func:`monitor.urls.comparable`), ``former`` as it was remembered before that form
        existed (:func:`monitor.urls.normalize`). A link known under its former form is not
        new; it is remembered under the new one from then on, so an upgrade alerts nothing.
        ``pending`` holds the entries of earlier tasks of the same group, not written yet:
        a link one of them found is not new again (it is updated in place)."""
        pending = {} if pending is None else pending
        modified: set[bytes] = set()
        found: list[NewLink] = []
        now = time.time()
        for url, text, former in links:
            code, key, entries = self._entries(watch_id, url, pending)
            if any(entry[0] == url for entry in entries):
                continue
            if former == url or not self._known(watch_id, former, pending):
                found.append(NewLink(url, text, code, alert_id(watch_id, code, len(entries))))
            entries.append([url, now])
            modified.add(key)
        return found, {key: pending[key] for key in modified}

    def _entries(self, watch_id: int, url: str, pending: dict[bytes, list]) -> tuple[str, bytes, list]:
        """``url``'s code, its key and the entries under it (read once per group)."""
        code = self.shorten(url)
        key = b"L%d:%s" % (watch_id, code.encode("ascii"))
        if key not in pending:
            stored = self.db.get(key)
            pending[key] = json.loads(stored) if stored else []
        return code, key, pending[key]

    def _known(self, watch_id: int, url: str, pending: dict[bytes, list]) -> bool:
        return any(entry[0] == url for entry in self._entries(watch_id, url, pending)[2])

    def commit(self, entries: dict[bytes, list], baselines: set[int], outbox_record: dict) -> bytes:
        """Write index entries, the baseline markers and the outbox record in one synced batch;
        return the outbox key."""
        key = self._next_key()
        with self.db.write_batch(sync=True) as batch:
            for link_key, value in entries.items():
                batch.put(link_key, json.dumps(value, separators=(",", ":")).encode("utf-8"))
            for watch_id in baselines:
                batch.put(b"B%d" % watch_id, b"1")
            batch.put(key, json.dumps(outbox_record, separators=(",", ":")).encode("utf-8"))
        return key

    def _next_key(self) -> bytes:
        # Strictly increasing even if the wall clock steps back: records drain in commit order.
        self._last_outbox = max(time.time_ns(), self._last_outbox + 1)
        return b"O%020d" % self._last_outbox

    def split(self, key: bytes, records: list[dict]) -> list[tuple[bytes, dict]]:
        """Replace an outbox record by several (in one synced batch); return them with their keys."""
        parts = [(self._next_key(), record) for record in records]
        with self.db.write_batch(sync=True) as batch:
            for part_key, record in parts:
                batch.put(part_key, json.dumps(record, separators=(",", ":")).encode("utf-8"))
            batch.delete(key)
        return parts

    def outbox(self) -> Iterator[tuple[bytes, dict]]:
        """Outbox records not yet applied, oldest first."""
        for key, value in self.db.iterator(prefix=b"O"):
            yield key, json.loads(value)

    def done(self, key: bytes) -> None:
        """Forget an outbox record once SQLite and every sink have it."""
        self.db.delete(key, sync=True)

"""The seen-link index in LevelDB (plyvel), owned by one processor, plus its outbox.

Keys:

* ``L<watch id>:<code>``  -> JSON list of ``[url, first_seen]``: every URL with that 6-character
  code; a second URL under the same code is a collision and is still a new link.
* ``B<watch id>``         -> baseline marker: the watch's first successful check is done.
* ``O<sequence>``         -> outbox: the effects of one task (links, alerts, watch status)
  waiting to be applied to SQLite and the sinks.

The link keys, the baseline marker and the outbox entry of a task are written in one
synced batch, so after a crash the index and the outbox always agree: whatever the
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
        self.db = plyvel.DB(str(path), create_if_missing=True)
        self.shorten = shorten
        last = next(self.db.iterator(prefix=b"O", reverse=True, include_value=False), b"O0")
        self._last_outbox = int(last[1:])

    def close(self) -> None:
        self.db.close()

    def is_baselined(self, watch_id: int) -> bool:
        return self.db.get(b"B%d" % watch_id) is not None

    def new_links(self, watch_id: int, links: list[tuple[str, str]]) -> tuple[list[NewLink], dict[bytes, list]]:
        """The links (``(normalised url, text)``) never seen for this watch, and the index
        entries to write for them. Nothing is written here: see :meth:`commit`."""
        pending: dict[bytes, list] = {}
        modified: set[bytes] = set()
        found: list[NewLink] = []
        now = time.time()
        for url, text in links:
            code = self.shorten(url)
            key = b"L%d:%s" % (watch_id, code.encode("ascii"))
            if key not in pending:
                stored = self.db.get(key)
                pending[key] = json.loads(stored) if stored else []
            entries = pending[key]
            if any(entry[0] == url for entry in entries):
                continue
            found.append(NewLink(url, text, code, alert_id(watch_id, code, len(entries))))
            entries.append([url, now])
            modified.add(key)
        return found, {key: pending[key] for key in modified}

    def commit(self, watch_id: int, entries: dict[bytes, list], outbox_record: dict, baseline: bool) -> bytes:
        """Write index entries, the baseline marker and the outbox record in one synced batch;
        return the outbox key."""
        # Strictly increasing even if the wall clock steps back: records drain in commit order.
        self._last_outbox = max(time.time_ns(), self._last_outbox + 1)
        key = b"O%020d" % self._last_outbox
        with self.db.write_batch(sync=True) as batch:
            for link_key, value in entries.items():
                batch.put(link_key, json.dumps(value, separators=(",", ":")).encode("utf-8"))
            if baseline:
                batch.put(b"B%d" % watch_id, b"1")
            batch.put(key, json.dumps(outbox_record, separators=(",", ":")).encode("utf-8"))
        return key

    def outbox(self) -> Iterator[tuple[bytes, dict]]:
        """Outbox records not yet applied, oldest first."""
        for key, value in self.db.iterator(prefix=b"O"):
            yield key, json.loads(value)

    def done(self, key: bytes) -> None:
        """Forget an outbox record once SQLite and every sink have it."""
        self.db.delete(key, sync=True)

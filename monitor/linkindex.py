"""The seen-link index in LevelDB (plyvel), owned by one processor, plus its outbox.

Keys:

* ``L<watch id>:<code>``  -> JSON list of ``[url, first_seen, last_seen]``: every URL with that
  6-character code; a second URL under the same code is a collision and is still a new link.
  ``last_seen`` is refreshed when it is older than ``refresh_every``, not on every check (a
  write per link per check would cost more than the check); entries written before it
  existed have none.
* ``B<watch id>``         -> baseline marker: the watch's first successful check is done; its
  value is ``<time> <links>`` of the watch's latest trusted check that found links (``1``
  before it was kept).
* ``S<watch id>``         -> JSON of what else the processor keeps of the watch's checks,
  when any of it is set (see :class:`Mark`): ``doubts``, how many checks in a row were
  doubted (too few links to be the baseline, or far fewer than the page had); ``ignored``,
  the query parameters its entries were last compared without; ``suspects``, parameters
  that renewed its links on its latest check (see :func:`monitor.urls.renewing_params`).
* ``O<sequence>``         -> outbox: the effects of one group of tasks (links, alerts, watch
  statuses) waiting to be applied to SQLite and the sinks.

The link keys, the baseline markers and the outbox entry of a group of tasks are written
in one synced batch, so after a crash the index and the outbox always agree: whatever the
index knows is either applied or still waiting in the outbox.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterator, Mapping

import plyvel

from monitor import codes
from monitor.urls import comparable


@dataclass(frozen=True)
class NewLink:
    url: str
    text: str
    code: str
    alert_id: str


@dataclass(frozen=True)
class Mark:
    """A watch's state in the index (:meth:`LinkIndex.mark`)."""
    baselined: bool
    checked_at: float | None = None  # its latest trusted check that found links (None: not known)
    links: int | None = None  # how many links that check found
    doubts: int = 0  # checks doubted in a row since
    ignored: frozenset[str] = frozenset()  # query parameters its entries were last compared without
    suspects: frozenset[str] = frozenset()  # parameters that renewed its links on its latest check

    def state(self) -> bytes | None:
        """The ``S`` key's value (None: nothing to keep)."""
        if not (self.doubts or self.ignored or self.suspects):
            return None
        return json.dumps({"doubts": self.doubts, "ignored": sorted(self.ignored),
                           "suspects": sorted(self.suspects)}, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Reappearance:
    """When a known link that comes back is new again: after it was off the page for longer
    than ``renotify_after`` seconds (0: never). ``last_seen`` is refreshed at most every
    ``refresh_every`` seconds, so a link counts as having left only when its ``last_seen``
    is older than the watch's previous check by more than that."""
    renotify_after: float = 30 * 86400.0

    @property
    def refresh_every(self) -> float:
        return min(86400.0, self.renotify_after / 4) if self.renotify_after else 86400.0


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
                batch.delete(b"S%d" % watch_id)
        return deleted

    def mark(self, watch_id: int) -> Mark:
        """What the index remembers of the watch's checks."""
        value, state = self.db.get(b"B%d" % watch_id), self.db.get(b"S%d" % watch_id)
        kept = json.loads(state) if state else {}
        mark = Mark(value is not None, doubts=kept.get("doubts", 0), ignored=frozenset(kept.get("ignored", ())),
                    suspects=frozenset(kept.get("suspects", ())))
        if value in (None, b"1"):
            return mark
        checked_at, links = value.split()
        return replace(mark, checked_at=float(checked_at), links=int(links))

    def new_links(self, watch_id: int, links: list[tuple[str, str, tuple[str, ...]]],
                  pending: dict[bytes, list] | None = None, reappearance: Reappearance = Reappearance(),
                  previous: float | None = None) -> tuple[list[NewLink], dict[bytes, list]]:
        """The links never seen for this watch, and the index entries to write for them.
        Nothing is written here: see :meth:`commit`.

        Each link is ``(url, text, formers)``: ``url`` in the form links are compared in
        (:func:`monitor.urls.comparable`), ``formers`` the forms it may be remembered under
        from before (before that form existed, or while the watch ignored other query
        parameters). A link known under a former form is not new; it is remembered under
        the new one from then on, so an upgrade or a changed setting alerts nothing.
        ``pending`` holds the entries of earlier tasks of the same group, not written yet:
        a link one of them found is not new again. It is not changed here: the caller adds
        the entries returned to it once it keeps them.

        A known link is new again when it comes back after ``reappearance.renotify_after``
        seconds off the page: it was missing from the watch's ``previous`` check (the time
        of its latest trusted check), and last seen that long ago. A watch that went
        unchecked for a while is no such case: its links were on its previous check."""
        pending = {} if pending is None else pending
        written: dict[bytes, list] = {}
        found: list[NewLink] = []
        now = time.time()
        refresh, renotify = reappearance.refresh_every, reappearance.renotify_after
        for url, text, formers in links:
            code, key, entries = self._entries(watch_id, url, pending, written)
            position, entry = next(((n, entry) for n, entry in enumerate(entries) if entry[0] == url), (None, None))
            if entry is None:
                if not any(self._known(watch_id, former, pending, written) for former in formers):
                    found.append(NewLink(url, text, code, alert_id(watch_id, code, len(entries))))
                self._write(key, entries, written).append([url, now, now])
                continue
            last_seen = entry[2] if len(entry) > 2 else None
            if last_seen is not None and last_seen >= now - refresh:
                continue  # seen recently: nothing to write
            if last_seen is not None and previous is not None and renotify \
                    and last_seen < previous - refresh and now - last_seen > renotify:
                found.append(NewLink(url, text, code, f"{alert_id(watch_id, code, position)}-back{int(last_seen)}"))
            self._write(key, entries, written)[position] = [url, entry[1], now]
        return found, written

    def _entries(self, watch_id: int, url: str, pending: dict[bytes, list],
                 written: dict[bytes, list]) -> tuple[str, bytes, list]:
        """``url``'s code, its key and the entries under it: as ``written`` by the call in
        hand, or by the group's earlier ones (``pending``), or stored (read once per group)."""
        code = self.shorten(url)
        key = b"L%d:%s" % (watch_id, code.encode("ascii"))
        if key in written:
            return code, key, written[key]
        if key not in pending:
            stored = self.db.get(key)
            # (str, not bytes: json.loads would first sniff the bytes' encoding, on every link of a page)
            pending[key] = json.loads(stored.decode("utf-8")) if stored else []
        return code, key, pending[key]

    @staticmethod
    def _write(key: bytes, entries: list, written: dict[bytes, list]) -> list:
        """The list of ``key``'s entries to change: a copy, so that until the caller adopts
        what was ``written`` (into its pending entries), the group's entries stay as they were."""
        if key not in written:
            written[key] = list(entries)
        return written[key]

    def _known(self, watch_id: int, url: str, pending: dict[bytes, list], written: dict[bytes, list]) -> bool:
        return any(entry[0] == url for entry in self._entries(watch_id, url, pending, written)[2])

    def urls(self, watch_id: int) -> Iterator[str]:
        """Every URL known for the watch."""
        for _key, value in self.db.iterator(prefix=b"L%d:" % watch_id):
            for entry in json.loads(value):
                yield entry[0]

    def rekey(self, watch_id: int, ignore: frozenset[str], pending: dict[bytes, list]) -> dict[bytes, list]:
        """Remember each of the watch's links under its form without the ``ignore``\\ d
        parameters too (first and last seen kept), so that ignoring a parameter from now on
        makes no known link new, whatever value it has on the page now; return the entries
        to write (``pending`` is left as it is). Nothing is written here."""
        written: dict[bytes, list] = {}
        for _key, value in self.db.iterator(prefix=b"L%d:" % watch_id):
            for url, *seen in json.loads(value):
                form = comparable(url, ignore)
                _code, key, entries = self._entries(watch_id, form, pending, written)
                if form != url and not any(entry[0] == form for entry in entries):
                    self._write(key, entries, written).append([form, *seen])
        return written

    def commit(self, entries: dict[bytes, list], outbox_record: dict, *,
               checked: Mapping[int, Mark] = MappingProxyType({}),
               states: Mapping[int, Mark] = MappingProxyType({})) -> bytes:
        """Write index entries, the baseline markers of the watches ``checked`` (the time and
        link count of their trusted check), the rest of the marks of the watches in
        ``states``, and the outbox record in one synced batch; return the outbox key."""
        key = self._next_key()
        with self.db.write_batch(sync=True) as batch:
            for link_key, value in entries.items():
                batch.put(link_key, json.dumps(value, separators=(",", ":")).encode("utf-8"))
            for watch_id, mark in checked.items():
                batch.put(b"B%d" % watch_id, b"%.3f %d" % (mark.checked_at, mark.links))
            for watch_id, mark in states.items():
                state = mark.state()
                if state is None:
                    batch.delete(b"S%d" % watch_id)
                else:
                    batch.put(b"S%d" % watch_id, state)
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

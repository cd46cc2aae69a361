"""The SQLite store (WAL mode): watch list, found links, alert history, and its migrations.

The CLI, the scheduler and the processor share the file through short transactions.
Migrations are the numbered files in ``migrations/``; ``schema_version`` records which are
applied. :func:`open_store` applies pending ones, so every process upgrades at start.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import math
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

from monitor.filters import Rule
from monitor.urls import redact

MAX_ID = 2**63 - 1  # SQLite's largest INTEGER: no row has a larger id
STRIKE_MEMORY = 86400.0  # seconds after a host's cooldown ends during which a new one counts as a strike
MAX_BACKOFF = 86400.0  # seconds: a watch whose job keeps failing is still tried once a day
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
FIRST_CHECK_SPREAD = 60  # a new watch is first checked within this many seconds


def parse_id(ref: str) -> int | None:
    """``ref`` as a row id when it is written as one (ASCII digits), else None (a URL, say).
    Past ``MAX_ID`` it is ``MAX_ID + 1`` (no such row), however many digits it has."""
    if not (ref.isascii() and ref.isdigit()):
        return None
    digits = ref.lstrip("0") or "0"
    return int(digits) if len(digits) <= 19 else MAX_ID + 1


class NotFound(LookupError):
    """No watch matches the given id or URL."""


class Declared(ValueError):
    """A sink or filter declared in the configuration file: it is changed there, not here."""


class Duplicate(ValueError):
    """The URL is already on the watch list."""


@dataclass(frozen=True)
class Watch:
    id: int
    url: str
    name: str | None
    tag: str | None
    interval_s: int
    enabled: bool
    next_due: float
    in_flight_since: float | None
    last_check: float | None
    last_status: str | None
    last_elapsed_ms: int | None
    consecutive_failures: int
    cost_ms: float | None = None  # moving average of the fetch time: the site's weight
    # Validators of the last successful check, sent with the next job (conditional GET, body hash).
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    selector: str = ""  # CSS selector: only the links inside the regions it matches ('': the whole page)
    ignore_params: str = ""  # query parameters its links are compared without: named by its user ...
    volatile_params: str = ""  # ... and found to change on every check (space-separated)
    links_known: int = 0
    new_links: int = 0


@dataclass(frozen=True)
class Proxy:
    id: int
    url: str  # with credentials: show it through urls.redact()
    last_error: str | None
    requests: int
    refusals: int
    failed_at: float | None  # when the proxy itself last failed (unreachable, 407)
    leased_to: tuple[str, ...] = ()  # the workers holding it (a proxy may serve several)


@dataclass(frozen=True)
class SinkRecord:
    """A sink and how its deliveries stand: ``failing_since`` is the oldest failed attempt
    among those still pending, ``last_error`` the newest error (both None when healthy)."""
    name: str
    kind: str
    target: str
    options: dict
    watch_id: int | None
    tag: str | None
    created_at: float
    delivered: int
    pending: int
    failed: int
    failing_since: float | None
    last_error: str | None
    declared: bool = False  # in the configuration file (see monitor/sinks/declared.py)


@dataclass(frozen=True)
class HostCooldown:
    """A host on the disable list: until when, why, since when, the how-many-th in a row,
    the exits it refused (``direct``, ``proxy 3``) and the worker that reported the last."""
    host: str
    until: float
    reason: str
    since: float
    strikes: int
    exits: str
    worker: str


@dataclass(frozen=True)
class WorkerRecord:
    id: str
    host: str
    pid: int
    state: str
    started_at: float
    last_heartbeat: float
    jobs_done: int
    errors: int
    current_job: str | None
    proxies: list[int]


@dataclass(frozen=True)
class LinkRecord:
    url: str
    text: str
    code: str
    first_seen: float


@dataclass(frozen=True)
class Validators:
    """What the next job of a watch carries: the conditional GET headers and the body hash."""
    etag: str | None
    last_modified: str | None
    content_hash: str | None


# How a check ended, as counted per minute in check_counts.
OUTCOMES = ("ok", "not_modified_http", "not_modified_hash", "error", "skipped")
FAILING = ("error", "skipped")  # the outcomes of a check that did not see the page
COMMON_TAG = 0.01  # the part of the watches from which a tag's alerts are found going back in time
DELIVERED_KEPT = 7 * 86400  # seconds a delivered delivery is kept (see Store.prune)
HISTORY = 50  # recent checks kept per watch (migrations/0015_check_history.sql)
# The upper bounds (seconds) of the fetch and parse time histograms (migrations/0016_timings.sql):
# pages parse in milliseconds and download in up to the fetch deadline. A bound added later
# starts counting from then (the rows keep the bound they were counted under).
TIMING_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class CheckResult:
    """The effects of one processed task, applied by :meth:`Store.record_results`."""
    watch_id: int
    checked_at: float
    status: str
    http_status: int | None
    elapsed_ms: int | None
    links: list[LinkRecord]
    alert_ids: dict[str, str]  # url -> alert id, for the links that raise an alert
    outcome: str = "ok"  # one of OUTCOMES
    validators: Validators | None = None  # None: keep the watch's (a failed check says nothing)
    fetched_at: float | None = None  # when the worker fetched the page (None: not known)
    notices: tuple[tuple[str, str], ...] = ()  # (alert id, text): alerts about the page itself
    health: str | None = None  # "broken" or "recovered": the alert about it is among the notices
    volatile: tuple[str, ...] = ()  # query parameters found to change on every check (added to the watch's)
    found: int | None = None  # links on the page (None: not parsed)
    parse_ms: float | None = None  # the time taken to extract them
    # The selector whose first check this is ('' for the whole page): its links are now the known ones.
    adopted_selector: str | None = None


def _bucket(seconds: float) -> float:
    """The histogram bucket a duration is counted in: the least bound it does not exceed."""
    return TIMING_BUCKETS_S[bisect.bisect_left(TIMING_BUCKETS_S, seconds)] if seconds <= TIMING_BUCKETS_S[-1] else math.inf


class CheckLine(NamedTuple):
    """One check in a watch's history (:meth:`Store.recent_checks`)."""
    checked_at: float
    outcome: str
    status: str
    elapsed_ms: int | None
    parse_ms: float | None
    found: int | None
    new: int
    alerted: int


class WatchState(NamedTuple):
    """A watch as the processor sees it (:meth:`Store.watch_states`)."""
    url: str
    last_fetched_at: float | None  # when the page behind its last applied result was fetched
    tag: str | None
    failing_since: float | None  # its checks fail (or are skipped) since then
    broken_alerted: bool  # the alert that it is failing went out (its recovery will be told)
    ignore_params: str  # query parameters its links are compared without (its user's) ...
    volatile_params: str  # ... and those found to change on every check
    selector: str  # only the links inside the regions it matches ('': the whole page)
    links_selector: str  # the selector its known links were found under (differs until adopted)

    @property
    def ignored(self) -> frozenset[str]:
        return frozenset(f"{self.ignore_params} {self.volatile_params}".split())


def url_of_watch(conn: sqlite3.Connection, watch_id: int) -> str:
    return conn.execute("SELECT url FROM watches WHERE id = ?", (watch_id,)).fetchone()[0]


def phase(watch_id: int, interval_s: int) -> int:
    """Stable offset of a watch within its interval, so restarts and bulk imports spread out."""
    digest = hashlib.sha256(str(watch_id).encode()).digest()
    return int.from_bytes(digest[:4], "big") % interval_s


def next_slot(watch_id: int, interval_s: int, now: float) -> float:
    """The first time after ``now`` that lies on the watch's phase grid."""
    offset = phase(watch_id, interval_s)
    return now - ((now - offset) % interval_s) + interval_s


def first_due(watch_id: int, interval_s: int, now: float) -> float:
    """When a newly added watch gets its baseline check: soon, but spread over a minute."""
    return now + phase(watch_id, min(interval_s, FIRST_CHECK_SPREAD))


def migration_files(directory: Path = MIGRATIONS_DIR) -> list[tuple[int, str, Path]]:
    """The numbered ``NNNN_name.sql`` files, in order."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        number, _, name = path.stem.partition("_")
        if number.isdigit():
            found.append((int(number), name, path))
    return found


def upgrade(conn: sqlite3.Connection, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations, each in its own transaction; return the names applied."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)")
    applied = []
    for number, name, path in migration_files(directory):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Checked inside the write lock: two processes starting together apply each file once.
            if conn.execute("SELECT 1 FROM schema_version WHERE version = ?", (number,)).fetchone():
                conn.execute("ROLLBACK")
                continue
            for statement in _statements(path.read_text(encoding="utf-8")):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (number, name, time.time()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(f"{number:04d}_{name}")
    return applied


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (executescript would commit on its own)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer
            buffer = ""
    if buffer.strip() and not buffer.strip().startswith("--"):
        yield buffer


_WATCH_COLUMNS = ("id, url, name, tag, interval_s, enabled, next_due, in_flight_since, last_check, "
                  "last_status, last_elapsed_ms, consecutive_failures, cost_ms, etag, last_modified, content_hash, "
                  "selector, ignore_params, volatile_params")
_WATCH_WIDTH = _WATCH_COLUMNS.count(",") + 1
# A search of the watch list (its text given four times; '' matches every watch).
# (Only a URL with an "@" can hold a password: the others are searched as they are, in SQL.)
_SEARCH = ("(? = '' OR instr(lower(CASE WHEN instr(url, '@') THEN redact(url) ELSE url END), lower(?)) "
           "OR instr(lower(COALESCE(name, '')), lower(?)) OR instr(lower(COALESCE(tag, '')), lower(?)))")


_PROXY_COLUMNS = ("id, url, last_error, requests, refusals, failed_at, "
                  "(SELECT group_concat(worker, ' ') FROM leases WHERE proxy_id = proxies.id)")


_SINK_COLUMNS = (
    "name, kind, target, options, watch_id, tag, created_at, "
    "delivered_before + (SELECT COUNT(*) FROM deliveries WHERE sink = s.name AND state = 'delivered'), "
    "(SELECT COUNT(*) FROM deliveries WHERE sink = s.name AND state = 'pending'), "
    "(SELECT COUNT(*) FROM deliveries WHERE sink = s.name AND state = 'failed'), "
    "(SELECT MIN(failing_since) FROM deliveries WHERE sink = s.name AND state = 'pending'), "
    "(SELECT last_error FROM deliveries WHERE sink = s.name AND last_error IS NOT NULL "
    " ORDER BY updated_at DESC LIMIT 1), declared")


def _sink(row: tuple) -> SinkRecord:
    return SinkRecord(row[0], row[1], row[2], json.loads(row[3]), *row[4:-1], bool(row[-1]))


def _proxy(row: tuple) -> Proxy:
    return Proxy(*row[:-1], tuple(sorted((row[-1] or "").split())))


def _watch(row: tuple, counts: tuple[int, int] = (0, 0)) -> Watch:
    return Watch(row[0], row[1], row[2], row[3], row[4], bool(row[5]), *row[6:_WATCH_WIDTH], *counts)


class Store:
    """Short transactions over the SQLite file; one instance per process."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.execute("PRAGMA busy_timeout=30000")
        # A search of the watch list must not find what is never shown (a URL's password).
        self.conn.create_function("redact", 1, redact, deterministic=True)

    def make_durable(self) -> None:
        """Every commit of this connection reaches the disk before it returns (WAL synced on
        commit), not only at the next checkpoint."""
        self.conn.execute("PRAGMA synchronous=FULL")

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE): all or nothing."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # --- the watch list -----------------------------------------------------------------
    def add_watch(self, url: str, interval_s: int, name: str | None = None, tag: str | None = None,
                  enabled: bool = True, now: float | None = None, selector: str = "") -> Watch:
        """Add a watch (``url`` already validated and normalised, ``selector`` checked);
        raise Duplicate if present."""
        now = time.time() if now is None else now
        with self.transaction() as conn:
            existing = conn.execute("SELECT id FROM watches WHERE url = ?", (url,)).fetchone()
            if existing:
                raise Duplicate(f"{redact(url)} is already watched (watch {existing[0]})")
            cursor = conn.execute(
                "INSERT INTO watches (url, name, tag, interval_s, enabled, created_at, next_due, selector, links_selector) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (url, name, tag, interval_s, int(enabled), now, now, selector, selector))
            watch_id = cursor.lastrowid
            conn.execute("UPDATE watches SET next_due = ? WHERE id = ?", (first_due(watch_id, interval_s, now), watch_id))
        return self.get_watch(watch_id)

    def watch_states(self, watch_ids: set[int]) -> dict[int, WatchState]:
        """What the processor needs of those of ``watch_ids`` still on the watch list."""
        ids = list(watch_ids)
        if not ids:
            return {}
        return {row[0]: WatchState(*row[1:]) for row in self.conn.execute(
            "SELECT id, url, last_fetched_at, tag, failing_since, broken_alerted, ignore_params, volatile_params, "
            "selector, links_selector FROM watches "
            f"WHERE id IN ({','.join('?' * len(ids))})", ids)}

    def get_watch(self, watch_id: int) -> Watch:
        row = None if watch_id > MAX_ID else \
            self.conn.execute(f"SELECT {_WATCH_COLUMNS} FROM watches WHERE id = ?", (watch_id,)).fetchone()
        if row is None:
            raise NotFound(f"no watch with id {watch_id}")
        return _watch(row)

    def find_watch(self, ref: str) -> Watch:
        """A watch by id (``12``) or by URL."""
        watch_id = parse_id(ref)
        if watch_id is not None and watch_id > MAX_ID:
            raise NotFound(f"no watch with id {ref[:30]}{'...' if len(ref) > 30 else ''}")
        if watch_id is not None:
            return self.get_watch(watch_id)
        row = self.conn.execute(f"SELECT {_WATCH_COLUMNS} FROM watches WHERE url = ?", (ref,)).fetchone()
        if row is None:
            raise NotFound(f"no watch with URL {ref}")
        return _watch(row)

    def list_watches(self, search: str = "", limit: int = -1, offset: int = 0) -> list[Watch]:
        """The watches (by id; ``limit`` of them after ``offset``, -1: all) with their counts
        of known links and of new links found (alerts); with ``search``, those whose URL,
        name or tag holds it (ASCII letters in any case)."""
        rows = self.conn.execute(f"SELECT {_WATCH_COLUMNS}, links_count, alerts_count FROM watches "
                                 f"WHERE {_SEARCH} ORDER BY id LIMIT ? OFFSET ?",
                                 (search, search, search, search, limit, offset)).fetchall()
        return [_watch(row[:_WATCH_WIDTH], row[_WATCH_WIDTH:]) for row in rows]

    def count_watches(self, search: str = "") -> int:
        """How many watches :meth:`list_watches` would give without a limit."""
        return self.conn.execute(f"SELECT COUNT(*) FROM watches WHERE {_SEARCH}", (search,) * 4).fetchone()[0]

    def tags(self) -> list[str]:
        """The tags in use, sorted."""
        return [row[0] for row in self.conn.execute("SELECT DISTINCT tag FROM watches WHERE tag IS NOT NULL ORDER BY tag")]

    def get_watch_with_counts(self, watch_id: int) -> Watch:
        """One watch as :meth:`list_watches` gives it (with its counts of known and new links)."""
        row = None if watch_id > MAX_ID else self.conn.execute(
            f"SELECT {_WATCH_COLUMNS}, links_count, alerts_count FROM watches WHERE id = ?", (watch_id,)).fetchone()
        if row is None:
            raise NotFound(f"no watch with id {watch_id}")
        return _watch(row[:_WATCH_WIDTH], row[_WATCH_WIDTH:])

    def remove_watch(self, watch_id: int) -> None:
        """Remove a watch, its links and alerts; its index entries go when the processor
        next looks at :meth:`removed_watches`."""
        with self.transaction() as conn:
            if conn.execute("DELETE FROM watches WHERE id = ?", (watch_id,)).rowcount == 0:
                raise NotFound(f"no watch with id {watch_id}")
            conn.execute("INSERT OR IGNORE INTO removed_watches (id, removed_at) VALUES (?, ?)", (watch_id, time.time()))

    def removed_watches(self) -> list[int]:
        return [row[0] for row in self.conn.execute("SELECT id FROM removed_watches ORDER BY id")]

    def forget_removed(self, watch_ids: list[int]) -> None:
        with self.transaction() as conn:
            conn.executemany("DELETE FROM removed_watches WHERE id = ?", [(i,) for i in watch_ids])

    def update_watch(self, watch_id: int, *, enabled: bool | None = None, interval_s: int | None = None,
                     name: str | None = None, tag: str | None = None, now: float | None = None) -> Watch:
        """Enable/disable a watch, change its interval (which also moves its next check), or
        its name or tag (checked; None: unchanged, '': none)."""
        now = time.time() if now is None else now
        with self.transaction() as conn:
            if conn.execute("SELECT 1 FROM watches WHERE id = ?", (watch_id,)).fetchone() is None:
                raise NotFound(f"no watch with id {watch_id}")
            if enabled is not None:
                conn.execute("UPDATE watches SET enabled = ? WHERE id = ?", (int(enabled), watch_id))
            if interval_s is not None:
                conn.execute("UPDATE watches SET interval_s = ?, next_due = MIN(next_due, ?) WHERE id = ?",
                             (interval_s, next_slot(watch_id, interval_s, now), watch_id))
            for column, value in (("name", name), ("tag", tag)):
                if value is not None:
                    conn.execute(f"UPDATE watches SET {column} = ? WHERE id = ?", (value or None, watch_id))
        return self.get_watch(watch_id)

    def set_selector(self, watch_id: int, selector: str, now: float | None = None) -> Watch:
        """Give a watch another selector (``selector`` checked; '' for the whole page).

        Its validators go (a 304 or an unchanged body says nothing about another region) and
        it is due at once, with a new job: the result of a job in flight, extracted under the
        former selector, is dropped by the processor. The first check under the new selector
        is adopted like a baseline (``links_selector`` still names the former one until then)."""
        now = time.time() if now is None else now
        with self.transaction() as conn:
            row = conn.execute("SELECT selector FROM watches WHERE id = ?", (watch_id,)).fetchone()
            if row is None:
                raise NotFound(f"no watch with id {watch_id}")
            if row[0] != selector:
                conn.execute("UPDATE watches SET selector = ?, etag = NULL, last_modified = NULL, content_hash = NULL, "
                             "in_flight_since = NULL, next_due = MIN(next_due, ?) WHERE id = ?", (selector, now, watch_id))
        return self.get_watch(watch_id)

    def forget_volatile_params(self, watch_id: int) -> Watch:
        """Stop ignoring the query parameters found to change on every check (found wrongly:
        a parameter that does change makes links new again, and may be found again)."""
        with self.transaction() as conn:
            if conn.execute("UPDATE watches SET volatile_params = '' WHERE id = ?", (watch_id,)).rowcount == 0:
                raise NotFound(f"no watch with id {watch_id}")
        return self.get_watch(watch_id)

    def set_ignore_params(self, watch_id: int, names: list[str]) -> Watch:
        """Compare a watch's links without these query parameters (lower case, checked)
        from its next check on; ``[]`` compares them whole again."""
        with self.transaction() as conn:
            if conn.execute("UPDATE watches SET ignore_params = ? WHERE id = ?",
                            (" ".join(sorted(set(names))), watch_id)).rowcount == 0:
                raise NotFound(f"no watch with id {watch_id}")
        return self.get_watch(watch_id)

    # --- scheduling -----------------------------------------------------------------
    def due_watches(self, now: float, limit: int) -> list[Watch]:
        """Enabled watches whose time has come and that are not in flight."""
        rows = self.conn.execute(f"""
            SELECT {_WATCH_COLUMNS} FROM watches
            WHERE enabled = 1 AND next_due <= ? AND in_flight_since IS NULL
            ORDER BY next_due LIMIT ?""", (now, limit)).fetchall()
        return [_watch(row) for row in rows]

    def time_out_jobs(self, now: float, job_timeout: float) -> list[tuple[int, int]]:
        """Watches in flight for longer than ``job_timeout``: their job was lost, or kept
        killing workers until it was dead-lettered. Each counts as a failure, says so in its
        status, and is due again only after a back-off (``job_timeout`` doubling with each
        failure in a row, at most ``MAX_BACKOFF``). Return ``(watch id, failures in a row)``."""
        rows = self.conn.execute("SELECT id, consecutive_failures FROM watches WHERE in_flight_since < ?",
                                 (now - job_timeout,)).fetchall()
        with self.transaction() as conn:
            for watch_id, failures in rows:
                backoff = min(job_timeout * 2 ** min(failures, 20), MAX_BACKOFF)
                conn.execute("UPDATE watches SET in_flight_since = NULL, consecutive_failures = ?, last_status = ?, "
                             "next_due = ? WHERE id = ?",
                             (failures + 1, f"error: no result within {job_timeout:g}s, {failures + 1} time(s) in a "
                                            f"row (a job that crashes workers ends in `monitor dlq list`); next try in "
                                            f"{backoff:.0f}s", now + backoff, watch_id))
        return [(watch_id, failures + 1) for watch_id, failures in rows]

    def mark_in_flight(self, watch_ids: list[int], now: float) -> None:
        if not watch_ids:
            return
        with self.transaction() as conn:
            conn.executemany("UPDATE watches SET in_flight_since = ? WHERE id = ?", [(now, i) for i in watch_ids])

    def enabled_watch_ids(self) -> list[int]:
        return [row[0] for row in self.conn.execute("SELECT id FROM watches WHERE enabled = 1 ORDER BY id")]

    def make_due(self, watch_ids: list[int], now: float) -> int:
        """Make watches due at once; return how many are in flight (being checked already)."""
        with self.transaction() as conn:
            conn.executemany("UPDATE watches SET next_due = MIN(next_due, ?) WHERE id = ?", [(now, i) for i in watch_ids])
            return sum(conn.execute("SELECT in_flight_since IS NOT NULL FROM watches WHERE id = ?", (i,)).fetchone()[0]
                       for i in watch_ids)

    def clear_in_flight(self, watch_ids: list[int], since: float) -> None:
        """Undo :meth:`mark_in_flight` for jobs that were not published after all."""
        with self.transaction() as conn:
            conn.executemany("UPDATE watches SET in_flight_since = NULL WHERE id = ? AND in_flight_since = ?",
                             [(i, since) for i in watch_ids])

    # --- results --------------------------------------------------------------------
    def record_results(self, results: list[CheckResult]) -> set[int]:
        """Apply the effects of a group of checks in one transaction; return the ids of the
        watches they were applied to (not removed ones, not stale results). Idempotent:
        replaying the same results changes nothing but the per-minute counts
        and the timings."""
        counts: dict[tuple[int, str], int] = {}
        timings: dict[tuple[str, float], list] = {}  # (kind, bucket) -> [checks, seconds]
        applied: set[int] = set()
        with self.transaction() as conn:
            for result in results:
                if self._record(conn, result):
                    applied.add(result.watch_id)
                    key = (int(result.checked_at // 60), result.outcome)
                    counts[key] = counts.get(key, 0) + 1
                    for kind, ms in (("fetch", result.elapsed_ms), ("parse", result.parse_ms)):
                        if ms is not None:
                            bucket = timings.setdefault((kind, _bucket(ms / 1000)), [0, 0.0])
                            bucket[0] += 1
                            bucket[1] += ms / 1000
            conn.executemany("INSERT INTO check_counts (minute, outcome, count) VALUES (?, ?, ?) "
                             "ON CONFLICT (minute, outcome) DO UPDATE SET count = count + excluded.count",
                             [(minute, outcome, count) for (minute, outcome), count in counts.items()])
            conn.executemany("INSERT INTO timings (kind, le, count, seconds) VALUES (?, ?, ?, ?) ON CONFLICT (kind, le) "
                             "DO UPDATE SET count = count + excluded.count, seconds = seconds + excluded.seconds",
                             [(kind, le, count, seconds) for (kind, le), (count, seconds) in timings.items()])
        return applied

    @staticmethod
    def _record(conn: sqlite3.Connection, result: CheckResult) -> bool:
        """One check's effects; False when its watch was removed while the job was in flight,
        or when the watch already has a result fetched later than this one (stale)."""
        row = conn.execute("SELECT interval_s, last_fetched_at FROM watches WHERE id = ?", (result.watch_id,)).fetchone()
        if row is None or (None not in (result.fetched_at, row[1]) and result.fetched_at < row[1]):
            return False
        new_links = conn.executemany(
            "INSERT OR IGNORE INTO links (watch_id, url, text, code, first_seen) VALUES (?, ?, ?, ?, ?)",
            [(result.watch_id, link.url, link.text, link.code, link.first_seen) for link in result.links]).rowcount
        alerts = [(result.alert_ids[link.url], result.watch_id, link.url, link.text, link.first_seen)
                  for link in result.links if link.url in result.alert_ids]
        alerts.extend((alert_id, result.watch_id, redact(url_of_watch(conn, result.watch_id)), text, result.checked_at)
                      for alert_id, text in result.notices)
        new_alerts = conn.executemany(
            "INSERT OR IGNORE INTO alerts (alert_id, watch_id, url, text, first_seen) VALUES (?, ?, ?, ?, ?)",
            alerts).rowcount
        # The check's line in the watch's history: the ring's next slot, once (a replayed
        # outbox record carries the same checked_at and adds no second line).
        kept = conn.execute("""
            INSERT OR REPLACE INTO checks (watch_id, slot, checked_at, outcome, status, elapsed_ms, parse_ms, found, new,
                                           alerted)
            SELECT id, checks_done % ?, ?, ?, ?, ?, ?, ?, ?, ? FROM watches
            WHERE id = ? AND NOT EXISTS (SELECT 1 FROM checks WHERE watch_id = ? AND checked_at = ?)""",
            (HISTORY, result.checked_at, result.outcome, result.status, result.elapsed_ms, result.parse_ms, result.found,
             len(result.links), len(result.alert_ids), result.watch_id, result.watch_id, result.checked_at)).rowcount
        conn.execute("""
            UPDATE watches SET last_check = :checked, last_status = :status, last_http_status = :http,
                   last_elapsed_ms = :elapsed, in_flight_since = NULL, next_due = :due,
                   last_fetched_at = COALESCE(:fetched, last_fetched_at),
                   links_count = links_count + :new_links, alerts_count = alerts_count + :new_alerts,
                   checks_done = checks_done + :kept,
                   consecutive_failures = CASE WHEN :failed THEN consecutive_failures + 1 ELSE 0 END,
                   failing_since = CASE WHEN :failing THEN COALESCE(failing_since, :checked) END,
                   broken_alerted = CASE WHEN :health = 'broken' THEN 1 WHEN :failing THEN broken_alerted ELSE 0 END,
                   cost_ms = CASE WHEN :elapsed IS NULL THEN cost_ms WHEN cost_ms IS NULL THEN :elapsed
                                  ELSE 0.7 * cost_ms + 0.3 * :elapsed END
            WHERE id = :id""", {"checked": result.checked_at, "status": result.status, "http": result.http_status,
                                "elapsed": result.elapsed_ms, "failed": result.status.startswith("error"),
                                "failing": result.outcome in FAILING, "health": result.health,
                                "id": result.watch_id, "due": next_slot(result.watch_id, row[0], result.checked_at),
                                "fetched": result.fetched_at, "new_links": max(new_links, 0),
                                "new_alerts": max(new_alerts, 0), "kept": kept})
        if result.volatile:
            known = conn.execute("SELECT volatile_params FROM watches WHERE id = ?", (result.watch_id,)).fetchone()[0]
            conn.execute("UPDATE watches SET volatile_params = ? WHERE id = ?",
                         (" ".join(sorted(set(known.split()) | set(result.volatile))), result.watch_id))
        if result.validators is not None:
            conn.execute("UPDATE watches SET etag = ?, last_modified = ?, content_hash = ? WHERE id = ?",
                         (result.validators.etag, result.validators.last_modified, result.validators.content_hash,
                          result.watch_id))
        if result.adopted_selector is not None:
            conn.execute("UPDATE watches SET links_selector = ? WHERE id = ?", (result.adopted_selector, result.watch_id))
        return True

    def recent_checks(self, watch_id: int) -> list[CheckLine]:
        """The watch's last ``HISTORY`` checks, newest first."""
        return [CheckLine(*row) for row in self.conn.execute(
            "SELECT checked_at, outcome, status, elapsed_ms, parse_ms, found, new, alerted FROM checks WHERE watch_id = ? "
            "ORDER BY checked_at DESC", (watch_id,))]

    def check_outcomes(self, watch_ids: list[int]) -> dict[int, list[tuple[str, int | None]]]:
        """The recent checks of these watches as ``(outcome, elapsed_ms)``, oldest first (the
        dashboard's sparklines)."""
        lines: dict[int, list[tuple[str, int | None]]] = {}
        for start in range(0, len(watch_ids), 500):  # (SQLite bounds the parameters of one query)
            chunk = watch_ids[start:start + 500]
            for watch_id, outcome, elapsed in self.conn.execute(
                    "SELECT watch_id, outcome, elapsed_ms FROM checks "
                    f"WHERE watch_id IN ({','.join('?' * len(chunk))}) ORDER BY watch_id, checked_at", chunk):
                lines.setdefault(watch_id, []).append((outcome, elapsed))
        return lines

    def alerts_per_day(self, watch_ids: list[int], now: float) -> dict[int, int]:
        """Alerts of each of these watches in the 24 hours before ``now``."""
        return {watch_id: self.conn.execute("SELECT COUNT(*) FROM alerts WHERE watch_id = ? AND first_seen >= ?",
                                            (watch_id, now - 86400)).fetchone()[0] for watch_id in watch_ids}

    def links(self, watch_id: int, limit: int | None = None, offset: int = 0) -> list[LinkRecord]:
        """Links known for a watch, newest first (``limit`` of them after ``offset``)."""
        rows = self.conn.execute(
            "SELECT url, text, code, first_seen FROM links WHERE watch_id = ? ORDER BY first_seen DESC, rowid DESC "
            "LIMIT ? OFFSET ?", (watch_id, -1 if limit is None else limit, offset)).fetchall()
        return [LinkRecord(*row) for row in rows]

    def alerts(self, since: float = 0.0, watch_id: int | None = None, after_rowid: int = 0, limit: int = -1,
               offset: int = 0) -> list[tuple[int, dict]]:
        """Alerts (oldest first; ``limit`` of them after ``offset``, -1: all) as ``(rowid,
        alert dict)``; ``after_rowid`` lets ``--follow`` poll."""
        query = """SELECT a.rowid, a.alert_id, a.watch_id, w.url, a.url, a.text, a.first_seen
                   FROM alerts a JOIN watches w ON w.id = a.watch_id
                   WHERE a.first_seen >= ? AND a.rowid > ?"""
        params: list = [since, after_rowid]
        if watch_id is not None:
            query += " AND a.watch_id = ?"
            params.append(watch_id)
        rows = self.conn.execute(query + " ORDER BY a.rowid LIMIT ? OFFSET ?", [*params, limit, offset]).fetchall()
        return [(row[0], {"alert_id": row[1], "watch_id": row[2], "baseUrl": row[3], "url": row[4],
                          "text": row[5], "first_seen": row[6]}) for row in rows]

    # --- the proxy pool ----------------------------------------------------------------
    def add_proxy(self, url: str, now: float | None = None) -> Proxy:
        with self.transaction() as conn:
            if conn.execute("SELECT 1 FROM proxies WHERE url = ?", (url,)).fetchone():
                raise Duplicate("this proxy is already in the pool")
            proxy_id = conn.execute("INSERT INTO proxies (url, created_at) VALUES (?, ?)",
                                    (url, time.time() if now is None else now)).lastrowid
        return self.get_proxy(proxy_id)

    def get_proxy(self, proxy_id: int) -> Proxy:
        row = None if proxy_id > MAX_ID else \
            self.conn.execute(f"SELECT {_PROXY_COLUMNS} FROM proxies WHERE id = ?", (proxy_id,)).fetchone()
        if row is None:
            raise NotFound(f"no proxy with id {proxy_id}")
        return _proxy(row)

    def list_proxies(self) -> list[Proxy]:
        rows = self.conn.execute(f"SELECT {_PROXY_COLUMNS} FROM proxies ORDER BY id").fetchall()
        return [_proxy(row) for row in rows]

    def remove_proxy(self, proxy_id: int) -> None:
        with self.transaction() as conn:
            conn.execute("DELETE FROM leases WHERE proxy_id = ?", (proxy_id,))
            if conn.execute("DELETE FROM proxies WHERE id = ?", (proxy_id,)).rowcount == 0:
                raise NotFound(f"no proxy with id {proxy_id}")

    def lease_proxies(self, worker: str, run: str, count: int, exclude: list[int], now: float,
                      host: str | None = None, refused_since: float = 0.0,
                      failed_since: float = 0.0) -> tuple[list[Proxy], int]:
        """Lease up to ``count`` proxies to ``worker`` (run ``run``): not in ``exclude``, not
        refused by ``host`` since ``refused_since``, not failed since ``failed_since``; the
        least shared, then least recently leased first. Return them and the pool's size."""
        with self.transaction() as conn:
            pool_size = self.pool_size()
            not_excluded = f"AND id NOT IN ({','.join('?' * len(exclude))})" if exclude else ""
            ids = [row[0] for row in conn.execute(f"""
                SELECT id FROM proxies
                WHERE id NOT IN (SELECT exit_id FROM refusals WHERE host = ? AND at >= ?)
                  AND COALESCE(failed_at, 0) < ? {not_excluded}
                ORDER BY (SELECT COUNT(*) FROM leases WHERE proxy_id = id),
                         COALESCE((SELECT MAX(leased_at) FROM leases WHERE proxy_id = id), 0), id
                LIMIT ?""", (host or "", refused_since, failed_since, *exclude, count))]
            conn.executemany("INSERT INTO leases (proxy_id, worker, run, leased_at) VALUES (?, ?, ?, ?) "
                             "ON CONFLICT (proxy_id, worker) DO UPDATE SET run = excluded.run, "
                             "leased_at = excluded.leased_at", [(proxy_id, worker, run, now) for proxy_id in ids])
        return [self.get_proxy(proxy_id) for proxy_id in ids], pool_size

    def pool_size(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM proxies").fetchone()[0]

    def release_proxies(self, worker: str, proxy_ids: list[int] | None = None) -> int:
        """Return ``worker``'s leases of ``proxy_ids`` (all of them when None) to the pool."""
        with self.transaction() as conn:
            if proxy_ids is None:
                return conn.execute("DELETE FROM leases WHERE worker = ?", (worker,)).rowcount
            return sum(conn.execute("DELETE FROM leases WHERE worker = ? AND proxy_id = ?", (worker, proxy_id)).rowcount
                       for proxy_id in proxy_ids)

    def end_earlier_runs(self, worker: str, run: str) -> None:
        """``worker`` is now the process ``run``: leases an earlier run of that name holds (it
        crashed and supervisord started it again) go back to the pool."""
        if self.conn.execute("SELECT 1 FROM leases WHERE worker = ? AND run != ? LIMIT 1", (worker, run)).fetchone():
            with self.transaction() as conn:
                conn.execute("DELETE FROM leases WHERE worker = ? AND run != ?", (worker, run))

    def proxies_failed(self, proxy_ids: list[int], now: float) -> None:
        with self.transaction() as conn:
            conn.executemany("UPDATE proxies SET failed_at = ? WHERE id = ?", [(now, proxy_id) for proxy_id in proxy_ids])

    def record_refusals(self, host: str, exit_ids: list[int], now: float) -> None:
        """``host`` refused the requester through these exits (0: the direct connection)."""
        with self.transaction() as conn:
            conn.executemany("INSERT INTO refusals (host, exit_id, at) VALUES (?, ?, ?) "
                             "ON CONFLICT (host, exit_id) DO UPDATE SET at = excluded.at",
                             [(host, exit_id, now) for exit_id in exit_ids])

    def refused_by_every_exit(self, host: str, since: float) -> list[int]:
        """The exits of the pool (``[0]``, the direct connection, when the pool is empty)
        if ``host`` refused every one of them since ``since``, else ``[]``. When it did,
        those refusals are forgotten (the host's cooldown starts now, and after it every
        exit gets a new chance)."""
        refused = {row[0] for row in self.conn.execute("SELECT exit_id FROM refusals WHERE host = ? AND at >= ?",
                                                       (host, since))}
        pool = {row[0] for row in self.conn.execute("SELECT id FROM proxies")} or {0}
        if not pool <= refused:
            return []
        with self.transaction() as conn:
            conn.execute("DELETE FROM refusals WHERE host = ? OR at < ?", (host, since))
        return sorted(pool)

    # --- the worker fleet -----------------------------------------------------------------
    def record_heartbeat(self, beat, now: float) -> None:
        """Upsert a worker from its heartbeat and add its per-proxy counters to the pool's."""
        with self.transaction() as conn:
            conn.execute("""
                INSERT INTO workers (id, host, pid, state, started_at, last_heartbeat, jobs_done, errors, current_job)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, state = excluded.state,
                    started_at = excluded.started_at, last_heartbeat = excluded.last_heartbeat,
                    jobs_done = excluded.jobs_done, errors = excluded.errors, current_job = excluded.current_job""",
                (beat.worker, beat.host, beat.pid, beat.state, beat.started_at, now, beat.jobs_done, beat.errors,
                 beat.current_job))
            for proxy in beat.proxies:
                conn.execute("UPDATE proxies SET requests = requests + ?, refusals = refusals + ?, "
                             "last_error = COALESCE(?, last_error) WHERE id = ?",
                             (proxy.get("requests", 0), proxy.get("refusals", 0), proxy.get("last_error"), proxy["id"]))
            if beat.state == "stopped":
                conn.execute("DELETE FROM leases WHERE worker = ?", (beat.worker,))
            else:
                conn.execute("DELETE FROM leases WHERE worker = ? AND run != ?", (beat.worker, beat.run))

    def mark_lost(self, now: float, lost_after: float) -> list[str]:
        """Workers silent for ``lost_after`` seconds become lost; their proxies return to the pool."""
        query = "SELECT id FROM workers WHERE state = 'alive' AND last_heartbeat < ?"
        # Called every second: take the write lock only when someone is actually lost.
        if self.conn.execute(query, (now - lost_after,)).fetchone() is None:
            return []
        with self.transaction() as conn:
            lost = [row[0] for row in conn.execute(query, (now - lost_after,))]
            for worker in lost:
                conn.execute("UPDATE workers SET state = 'lost', current_job = NULL WHERE id = ?", (worker,))
                conn.execute("DELETE FROM leases WHERE worker = ?", (worker,))
        return lost

    def prune(self, now: float, refusals_since: float) -> dict[str, int]:
        """Forget what is no use any more, so the tables stay small over years: workers
        stopped or lost a week ago, cooldowns that ended a day ago, refusals older than
        ``refusals_since``, per-minute check counts older than a day (added first to the
        minute-0 rows, so the totals :meth:`check_totals` serves never go down), deliveries
        delivered a week ago (counted first in their sink's ``delivered_before``). Return the
        rows removed per table."""
        with self.transaction() as conn:
            conn.execute("""
                INSERT INTO check_counts (minute, outcome, count)
                SELECT 0, outcome, SUM(count) FROM check_counts WHERE minute > 0 AND minute < ? GROUP BY outcome
                ON CONFLICT (minute, outcome) DO UPDATE SET count = count + excluded.count""",
                         (int((now - 86400) // 60),))
            conn.execute("""
                UPDATE sinks SET delivered_before = delivered_before + (
                    SELECT COUNT(*) FROM deliveries WHERE sink = sinks.name AND state = 'delivered' AND updated_at < ?)""",
                         (now - DELIVERED_KEPT,))
            return {
                "workers": conn.execute("DELETE FROM workers WHERE state != 'alive' AND last_heartbeat < ?",
                                        (now - 7 * 86400,)).rowcount,
                "host_cooldowns": conn.execute("DELETE FROM host_cooldowns WHERE until < ?", (now - 86400,)).rowcount,
                "refusals": conn.execute("DELETE FROM refusals WHERE at < ?", (refusals_since,)).rowcount,
                "check_counts": conn.execute("DELETE FROM check_counts WHERE minute > 0 AND minute < ?",
                                             (int((now - 86400) // 60),)).rowcount,
                "deliveries": conn.execute("DELETE FROM deliveries WHERE state = 'delivered' AND updated_at < ?",
                                           (now - DELIVERED_KEPT,)).rowcount,
            }

    def forget_ended_workers(self) -> int:
        """Delete the rows of worker runs that stopped or were lost (the stack starting
        anew makes them history); return how many."""
        with self.transaction() as conn:
            return conn.execute("DELETE FROM workers WHERE state != 'alive'").rowcount

    def list_workers(self) -> list[WorkerRecord]:
        rows = self.conn.execute("SELECT id, host, pid, state, started_at, last_heartbeat, jobs_done, errors, current_job, "
                                 "(SELECT group_concat(l.proxy_id) FROM leases l WHERE l.worker = w.id) "
                                 "FROM workers w ORDER BY id").fetchall()
        return [WorkerRecord(*row[:9], [int(i) for i in (row[9] or "").split(",") if i]) for row in rows]

    # --- the host disable list ---------------------------------------------------------------
    def disable_host(self, host: str, now: float, first: float, longest: float, reason: str, exits: str,
                     worker: str) -> HostCooldown:
        """Put ``host`` on the disable list: for ``first`` seconds, twice as long for each
        cooldown in a row (one that starts less than a day after the previous one ended),
        at most ``longest``. One refusal is not two hours; a host that keeps refusing is."""
        with self.transaction() as conn:
            row = conn.execute("SELECT until, strikes FROM host_cooldowns WHERE host = ?", (host,)).fetchone()
            strikes = row[1] + 1 if row is not None and row[0] > now - STRIKE_MEMORY else 1
            until = now + min(first * 2 ** min(strikes - 1, 30), longest)
            conn.execute("INSERT INTO host_cooldowns (host, until, reason, since, strikes, exits, worker) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (host) DO UPDATE SET until = excluded.until, "
                         "reason = excluded.reason, since = excluded.since, strikes = excluded.strikes, "
                         "exits = excluded.exits, worker = excluded.worker",
                         (host, until, reason, now, strikes, exits, worker))
        return HostCooldown(host, until, reason, now, strikes, exits, worker)

    def enable_host(self, host: str, now: float) -> bool:
        """Lift ``host``'s cooldown and forget its refusals (its next one starts afresh);
        return whether it was disabled."""
        with self.transaction() as conn:
            row = conn.execute("SELECT until FROM host_cooldowns WHERE host = ?", (host,)).fetchone()
            conn.execute("DELETE FROM host_cooldowns WHERE host = ?", (host,))
            conn.execute("DELETE FROM refusals WHERE host = ?", (host,))
        return row is not None and row[0] > now

    def host_cooldowns(self, now: float) -> list[HostCooldown]:
        """The hosts disabled at ``now``, the soonest to end first."""
        rows = self.conn.execute("SELECT host, until, reason, since, strikes, exits, worker FROM host_cooldowns "
                                 "WHERE until > ? ORDER BY until, host", (now,)).fetchall()
        return [HostCooldown(*row) for row in rows]

    def cooldowns(self, now: float) -> dict[str, float]:
        """Hosts disabled at ``now``: ``{host: until}``."""
        return dict(self.conn.execute("SELECT host, until FROM host_cooldowns WHERE until > ?", (now,)).fetchall())

    # --- rules that hold back alerts (monitor/filters.py) ---------------------------------
    def add_filter(self, rule: str, pattern: str, watch_id: int | None, tag: str | None, now: float) -> int:
        with self.transaction() as conn:
            return conn.execute("INSERT INTO filters (rule, pattern, watch_id, tag, created_at) VALUES (?, ?, ?, ?, ?)",
                                (rule, pattern, watch_id, tag, now)).lastrowid

    def list_filters(self) -> list[Rule]:
        return [Rule(*row) for row in self.conn.execute("SELECT id, rule, pattern, watch_id, tag FROM filters ORDER BY id")]

    def filters_signature(self) -> tuple:
        """Changes whenever a rule is added or removed (rules are never edited in place)."""
        return self.conn.execute("SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(SUM(id), 0) FROM filters").fetchone()

    def watch_urls(self) -> list[tuple[int, str]]:
        """``(id, url)`` of every watch: the pages the noise rule groups by site."""
        return self.conn.execute("SELECT id, url FROM watches ORDER BY id").fetchall()

    def watches_knowing(self, url: str, watch_ids: list[int]) -> int:
        """On how many of ``watch_ids`` the link ``url`` (comparable form) is known."""
        return self.conn.execute(f"SELECT COUNT(*) FROM links WHERE url = ? AND watch_id IN ({','.join('?' * len(watch_ids))})",
                                 (url, *watch_ids)).fetchone()[0]

    def remove_filter(self, filter_id: int) -> None:
        """Remove a rule added with the CLI (:class:`Declared` for one from the configuration file)."""
        with self.transaction() as conn:
            row = conn.execute("DELETE FROM filters WHERE id = ? RETURNING declared", (min(filter_id, MAX_ID),)).fetchone()
            if row is None:
                raise NotFound(f"no filter with id {filter_id}")
            if row[0]:
                raise Declared(f"filter {filter_id} is declared in the configuration file")

    def declared_filter_ids(self) -> set[int]:
        return {row[0] for row in self.conn.execute("SELECT id FROM filters WHERE declared = 1")}

    def sync_declared_filters(self, rules: list[tuple[str, str, int | None, str | None]], now: float) -> list[str]:
        """Make the declared rules exactly ``rules`` (rule, pattern, watch id, tag): a rule is
        added or removed, never edited in place (see :meth:`filters_signature`). Return what
        changed, a line each."""
        wanted = list(dict.fromkeys(rules))  # a rule written twice is one rule

        def changes(conn: sqlite3.Connection) -> tuple[list[tuple], dict[int, tuple]]:
            have = {row[0]: tuple(row[1:]) for row in
                    conn.execute("SELECT id, rule, pattern, watch_id, tag FROM filters WHERE declared = 1")}
            return [rule for rule in wanted if rule not in have.values()], \
                {filter_id: rule for filter_id, rule in have.items() if rule not in wanted}

        if not any(changes(self.conn)):
            return []
        with self.transaction() as conn:  # looked at again: another process may have synced meanwhile
            added, stale = changes(conn)
            conn.executemany("DELETE FROM filters WHERE id = ?", [(filter_id,) for filter_id in stale])
            conn.executemany("INSERT INTO filters (rule, pattern, watch_id, tag, created_at, declared) "
                             "VALUES (?, ?, ?, ?, ?, 1)", [(*rule, now) for rule in added])
        return [f"filter {' '.join(filter(None, rule[:2]))} removed" for rule in stale.values()] + \
            [f"filter {' '.join(filter(None, rule[:2]))} added" for rule in added]

    # --- alert sinks and deliveries (the notifier's side; see migrations/0009_sinks.sql) ------
    def add_sink(self, name: str, kind: str, target: str, options: dict, watch_id: int | None, tag: str | None,
                 now: float) -> None:
        """A sink that receives the alerts raised from now on (of one watch, one tag, or all)."""
        with self.transaction() as conn:
            if conn.execute("SELECT 1 FROM sinks WHERE name = ?", (name,)).fetchone():
                raise Duplicate(f"a sink named {name!r} exists already")
            conn.execute("INSERT INTO sinks (name, kind, target, options, watch_id, tag, created_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)", (name, kind, target, json.dumps(options), watch_id, tag, now))

    def get_sink(self, name: str) -> SinkRecord:
        row = self.conn.execute(f"SELECT {_SINK_COLUMNS} FROM sinks s WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFound(f"no sink named {name!r}")
        return _sink(row)

    def list_sinks(self) -> list[SinkRecord]:
        """Every sink with its delivery counts, oldest first."""
        return [_sink(row) for row in self.conn.execute(f"SELECT {_SINK_COLUMNS} FROM sinks s ORDER BY created_at, name")]

    def remove_sink(self, name: str) -> None:
        """Remove a sink added with the CLI and its deliveries (pending ones are not sent);
        :class:`Declared` for one from the configuration file."""
        with self.transaction() as conn:
            row = conn.execute("DELETE FROM sinks WHERE name = ? RETURNING declared", (name,)).fetchone()
            if row is None:
                raise NotFound(f"no sink named {name!r}")
            if row[0]:
                raise Declared(f"sink {name!r} is declared in the configuration file")

    def sync_declared_sinks(self, sinks: dict[str, tuple[str, str, dict, int | None, str | None]],
                            now: float) -> list[str]:
        """Make the declared sinks exactly ``sinks`` (name: kind, target, options, watch id,
        tag): add the new ones, update the changed ones in place (their deliveries and
        history stay), remove those no longer declared with their deliveries. A sink added
        with the CLI under a declared name becomes the declared one. Return what changed."""
        def changes(conn: sqlite3.Connection) -> tuple[dict[str, tuple], list[str]]:
            have = {row[0]: (row[1], row[2], json.loads(row[3]), row[4], row[5], bool(row[6])) for row in
                    conn.execute("SELECT name, kind, target, options, watch_id, tag, declared FROM sinks")}
            return {name: sink for name, sink in sinks.items() if have.get(name) != (*sink, True)}, \
                [name for name, sink in have.items() if sink[-1] and name not in sinks]

        if not any(changes(self.conn)):
            return []
        with self.transaction() as conn:  # looked at again: another process may have synced meanwhile
            changed, stale = changes(conn)
            conn.executemany("DELETE FROM sinks WHERE name = ?", [(name,) for name in stale])
            conn.executemany("""
                INSERT INTO sinks (name, kind, target, options, watch_id, tag, created_at, declared)
                VALUES (?, ?, ?, ?, ?, ?, ?, 1)
                ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, target = excluded.target,
                    options = excluded.options, watch_id = excluded.watch_id, tag = excluded.tag, declared = 1""",
                [(name, kind, target, json.dumps(options), watch_id, tag, now)
                 for name, (kind, target, options, watch_id, tag) in changed.items()])
        return [f"sink {name} removed" for name in stale] + [f"sink {name} declared" for name in changed]

    def due_deliveries(self, sink: str, now: float, limit: int) -> list[dict]:
        """The alerts due for ``sink``, oldest first, as sinks receive them."""
        rows = self.conn.execute("""
            SELECT a.alert_id, a.watch_id, w.url, w.name, w.tag, a.url, a.text, a.first_seen, d.attempts
            FROM deliveries d JOIN alerts a ON a.alert_id = d.alert_id JOIN watches w ON w.id = a.watch_id
            WHERE d.state = 'pending' AND d.sink = ? AND d.next_try <= ?
            ORDER BY a.first_seen, a.alert_id LIMIT ?""", (sink, now, limit)).fetchall()
        return [{"alert_id": r[0], "watch_id": r[1], "baseUrl": r[2], "watch_name": r[3], "tag": r[4], "url": r[5],
                 "text": r[6], "first_seen": r[7], "attempts": r[8]} for r in rows]

    def sink_names(self) -> list[str]:
        return [row[0] for row in self.conn.execute("SELECT name FROM sinks ORDER BY name")]

    def sink_definitions(self) -> dict[str, tuple[str, str, dict]]:
        """Every sink's kind, target and options, by name: what its channel is built from."""
        return {row[0]: (row[1], row[2], json.loads(row[3]))
                for row in self.conn.execute("SELECT name, kind, target, options FROM sinks ORDER BY name")}

    def recent_alerts(self, limit: int, watch_id: int | None = None, tag: str | None = None,
                      after_rowid: int = 0) -> list[dict]:
        """The newest ``limit`` alerts (of one watch, or one tag), newest first; with
        ``after_rowid``, only those recorded after it (what a live page has not shown yet)."""
        # Only the filters given, so that one watch's alerts are read by its index; a live
        # page's poll reads the alerts recorded since, by rowid, not every alert by time. A
        # tag's: a common tag's newest are found soon going back in time (the index would sort
        # all its alerts), a rare tag's through the index (going back in time would read every
        # alert); "+" keeps SQLite off the index.
        common = tag is not None and self._tag_share(tag) >= COMMON_TAG
        filters = [("a.watch_id = ?", watch_id), ("+w.tag = ?" if common else "w.tag = ?", tag),
                   ("a.rowid > ?", after_rowid or None)]
        kept = [(condition, value) for condition, value in filters if value is not None]
        rows = self.conn.execute(f"""
            SELECT a.alert_id, a.watch_id, w.url, w.name, w.tag, a.url, a.text, a.first_seen, a.rowid
            FROM alerts a JOIN watches w ON w.id = a.watch_id
            WHERE {' AND '.join(condition for condition, _ in kept) or 1}
            ORDER BY {'a.rowid DESC' if after_rowid else 'a.first_seen DESC, a.rowid DESC'} LIMIT ?""",
            [value for _, value in kept] + [limit]).fetchall()
        return [{"alert_id": r[0], "watch_id": r[1], "baseUrl": r[2], "watch_name": r[3], "tag": r[4], "url": r[5],
                 "text": r[6], "first_seen": r[7], "rowid": r[8]} for r in rows]

    def _tag_share(self, tag: str) -> float:
        """The part of the watches that have this tag."""
        tagged, total = self.conn.execute("SELECT (SELECT COUNT(*) FROM watches WHERE tag = ?), COUNT(*) FROM watches",
                                          (tag,)).fetchone()
        return tagged / max(total, 1)

    def last_alert_rowid(self) -> int:
        """The rowid of the newest alert (0 when none): where a live page starts polling from."""
        return self.conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM alerts").fetchone()[0]

    def alerts_since(self, rowid: int) -> tuple[int, set[int], set[str]]:
        """Alerts recorded after ``rowid``: the newest rowid, and their watches and tags."""
        rows = self.conn.execute("SELECT a.rowid, a.watch_id, w.tag FROM alerts a JOIN watches w ON w.id = a.watch_id "
                                 "WHERE a.rowid > ?", (rowid,)).fetchall()
        return (max((row[0] for row in rows), default=rowid), {row[1] for row in rows},
                {row[2] for row in rows if row[2]})

    def next_delivery_at(self, sink: str, hold: float = 0.0, full: int = 1) -> float | None:
        """When ``sink`` has alerts to send, None when nothing is pending: its earliest
        pending delivery's next try; for a sink that gathers alerts (a digest), not before
        the oldest alert has waited ``hold`` seconds, unless ``full`` deliveries wait."""
        # (The index's first entry answers MIN(next_try): a sink with half a million
        # deliveries waiting costs no more per round than one with none.)
        due = self.conn.execute("SELECT MIN(next_try) FROM deliveries WHERE state = 'pending' AND sink = ?",
                                (sink,)).fetchone()[0]
        if not hold or due is None:
            return due
        waiting = self.conn.execute("SELECT COUNT(*) FROM (SELECT 1 FROM deliveries WHERE state = 'pending' "
                                    "AND sink = ? LIMIT ?)", (sink, full)).fetchone()[0]
        if waiting >= full:
            return due
        return self.conn.execute("""
            SELECT MIN(MAX(d.next_try, a.first_seen + ?))
            FROM deliveries d JOIN alerts a ON a.alert_id = d.alert_id
            WHERE d.state = 'pending' AND d.sink = ?""", (hold, sink)).fetchone()[0]

    def delivered(self, sink: str, alert_ids: list[str], now: float) -> None:
        with self.transaction() as conn:
            conn.executemany("UPDATE deliveries SET state = 'delivered', attempts = attempts + 1, "
                             "updated_at = ? WHERE sink = ? AND alert_id = ?", [(now, sink, a) for a in alert_ids])

    def delivery_failed(self, sink: str, alert_ids: list[str], error: str, now: float, first_wait: float,
                        longest_wait: float, max_attempts: int) -> int:
        """Count a failed attempt: try again after ``first_wait`` doubling per attempt (at
        most ``longest_wait``); after ``max_attempts`` the delivery is ``failed`` (the
        sink's dead letters). Return how many gave up now."""
        gave_up = 0
        with self.transaction() as conn:
            for alert_id in alert_ids:
                row = conn.execute("""
                    UPDATE deliveries SET attempts = attempts + 1, last_error = ?, updated_at = ?,
                           failing_since = COALESCE(failing_since, ?),
                           state = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE 'pending' END,
                           next_try = ? + MIN(? * (1 << MIN(attempts, 30)), ?)
                    WHERE sink = ? AND alert_id = ? AND state = 'pending' RETURNING state""",
                    (error, now, now, max_attempts, now, first_wait, longest_wait, sink, alert_id)).fetchone()
                gave_up += row is not None and row[0] == "failed"
        return gave_up

    def failed_deliveries(self, sink: str | None = None, limit: int = -1, offset: int = 0) -> list[dict]:
        """Deliveries given up on (the sinks' dead letters), oldest first (``limit`` of them
        after ``offset``, -1: all)."""
        rows = self.conn.execute("""
            SELECT d.sink, d.alert_id, a.url, a.text, d.attempts, d.last_error, d.updated_at
            FROM deliveries d JOIN alerts a ON a.alert_id = d.alert_id
            WHERE d.state = 'failed' AND (? IS NULL OR d.sink = ?) ORDER BY d.updated_at, d.alert_id LIMIT ? OFFSET ?""",
                                 (sink, sink, limit, offset)).fetchall()
        return [{"sink": r[0], "alert_id": r[1], "url": r[2], "text": r[3], "attempts": r[4], "last_error": r[5],
                 "failed_at": r[6]} for r in rows]

    def retry_failed(self, now: float, sink: str | None = None, alert_ids: list[str] | None = None) -> int:
        """Make failed deliveries pending again, due now, with a fresh count of attempts."""
        query = ("UPDATE deliveries SET state = 'pending', attempts = 0, failing_since = NULL, next_try = ?, updated_at = ? "
                 "WHERE state = 'failed' AND (? IS NULL OR sink = ?)")
        params: list = [now, now, sink, sink]
        if alert_ids is not None:
            query += f" AND alert_id IN ({','.join('?' * len(alert_ids))})"
            params.extend(alert_ids)
        with self.transaction() as conn:
            return conn.execute(query, params).rowcount

    def costliest(self, limit: int) -> list[Watch]:
        """The watches whose fetches cost most (the patent's site weights), heaviest first."""
        rows = self.conn.execute(f"SELECT {_WATCH_COLUMNS} FROM watches WHERE cost_ms IS NOT NULL "
                                 "ORDER BY cost_ms DESC LIMIT ?", (limit,)).fetchall()
        return [_watch(row) for row in rows]

    def check_rates(self, now: float, seconds: int) -> dict[str, float]:
        """Checks per second over about the last ``seconds`` (whole minutes of check_counts
        plus the current one), in total and per outcome."""
        first_minute = int((now - seconds) // 60)
        span = max(now - first_minute * 60, 1.0)
        rows = self.conn.execute("SELECT outcome, SUM(count) FROM check_counts WHERE minute >= ? GROUP BY outcome",
                                 (first_minute,)).fetchall()
        rates = {outcome: count / span for outcome, count in rows}
        return {"total": sum(rates.values()), **rates}

    def schedule_lag(self, now: float) -> dict[str, float | int]:
        """How far behind schedule the fleet is: the most overdue enabled watch (seconds
        past its due time) and how many are overdue by more than their own interval."""
        behind, late = self.conn.execute(
            "SELECT MAX(? - next_due), SUM(? - next_due > interval_s) FROM watches WHERE enabled = 1 AND next_due <= ?",
            (now, now, now)).fetchone()
        return {"behind_s": behind or 0.0, "overdue_by_an_interval": late or 0}

    def summary(self, now: float, job_timeout: float) -> dict[str, int]:
        """Counts for ``monitor status``: watches due, in flight, failing; alerts in the last hour."""
        one = lambda sql, *args: self.conn.execute(sql, args).fetchone()[0]  # noqa: E731
        return {
            "watches": one("SELECT COUNT(*) FROM watches"),
            "enabled": one("SELECT COUNT(*) FROM watches WHERE enabled = 1"),
            "due": one("SELECT COUNT(*) FROM watches WHERE enabled = 1 AND next_due <= ? AND in_flight_since IS NULL", now),
            "in_flight": one("SELECT COUNT(*) FROM watches WHERE in_flight_since IS NOT NULL"),
            "failing": one("SELECT COUNT(*) FROM watches WHERE consecutive_failures > 0"),
            "alerts_last_hour": one("SELECT COUNT(*) FROM alerts WHERE first_seen >= ?", now - 3600),
        }

    def check_totals(self) -> dict[str, int]:
        """Checks ever recorded, per outcome (what ``/metrics`` counts; see :meth:`prune`)."""
        return dict(self.conn.execute("SELECT outcome, SUM(count) FROM check_counts GROUP BY outcome").fetchall())

    def timing_histogram(self, kind: str) -> tuple[list[tuple[float, int]], float]:
        """Every check's ``kind`` time ('fetch' or 'parse') ever recorded, as a Prometheus
        histogram: ``(bound, checks that took at most that long)`` for each bound of
        ``TIMING_BUCKETS_S`` and +Inf (cumulative), and the seconds they took in all."""
        rows = self.conn.execute("SELECT le, count, seconds FROM timings WHERE kind = ?", (kind,)).fetchall()
        buckets = [(bound, sum(count for le, count, _ in rows if le <= bound)) for bound in (*TIMING_BUCKETS_S, math.inf)]
        return buckets, sum(seconds for _, _, seconds in rows)

    def overdue_watches(self, now: float, margin: float) -> tuple[int, tuple[int, float, int] | None]:
        """Enabled watches due for longer than ``margin`` or their own interval, whichever is
        longer (no check for a whole extra interval: the pipeline is stuck): how many, and the
        most overdue one as (id, seconds overdue, interval)."""
        late = "enabled = 1 AND ? - next_due > MAX(?, interval_s)"
        count = self.conn.execute(f"SELECT COUNT(*) FROM watches WHERE {late}", (now, margin)).fetchone()[0]
        worst = self.conn.execute(f"SELECT id, ? - next_due, interval_s FROM watches WHERE {late} "
                                  "ORDER BY next_due LIMIT 1", (now, now, margin)).fetchone()
        return count, tuple(worst) if worst else None


def open_store(path: Path) -> Store:
    """Open the SQLite store, applying pending migrations first."""
    store = Store(path)
    upgrade(store.conn)
    return store

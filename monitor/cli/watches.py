"""``monitor watch ...``, ``monitor links`` and ``monitor alerts``: the watch list and what it found."""
from __future__ import annotations

import csv
import dataclasses
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple, TextIO
from urllib.parse import urlsplit

from monitor import imports
from monitor.cli.common import (
    UsageError,
    checked_label,
    cost,
    find_watch,
    interval_seconds,
    print_json,
    table,
    ts,
    watch_id_of,
    watch_url,
)
from monitor.durations import format_age, format_duration, parse_duration
from monitor.store import Duplicate, Store, Watch
from monitor.urls import MASK, redact


# --- watch ---------------------------------------------------------------------------------
def checked_selector(selector: str) -> str:
    """A ``--selector`` value, checked (UsageError with the reason when it cannot be read)."""
    from monitor.parsing.regions import BadSelector, check_selector

    try:
        return check_selector(selector)
    except BadSelector as exc:
        raise UsageError(f"--selector: {exc}") from None


def checked_params(names: list[str]) -> list[str]:
    """``--ignore-param`` values: query parameter names, lower case ('' alone: none)."""
    if names == [""]:
        return []
    for name in names:
        if not name or len(name) > 100 or any(char in name for char in "&=?# \t\n"):
            raise UsageError(f"--ignore-param: {name[:100]!r} is not a query parameter name (as in ?sid=...)")
    return sorted({name.lower() for name in names})


def _region(selector: str) -> str:
    return f"only links inside {selector!r}" if selector else "every link of the page"


def add_watch(config, store: Store, url: str, interval: str | None, name: str | None = None, tag: str | None = None,
              selector: str | None = None, ignore_params: list[str] | None = None) -> tuple[Watch, str | None]:
    """Check a new watch's settings as ``watch add`` takes them, then add it (UsageError, and
    nothing added, on bad input or a duplicate). Returns the watch and a warning, if any
    (see :func:`~monitor.cli.common.watch_url`). Shared with the web API."""
    interval_s = interval_seconds(interval, config)
    checked_url, warning = watch_url(url, config)
    checked = "" if selector is None else checked_selector(selector)
    params = checked_params(ignore_params or [""])
    name, tag = checked_label("name", name) or None, checked_label("tag", tag) or None
    try:
        watch = store.add_watch(checked_url, interval_s, name, tag, selector=checked)
    except Duplicate as exc:
        raise UsageError(str(exc)) from None
    if params:
        watch = store.set_ignore_params(watch.id, params)
    return watch, warning


def cmd_watch_add(args, config, store) -> None:
    watch, warning = add_watch(config, store, args.url, args.interval, args.name, args.tag, args.selector,
                               args.ignore_param)
    print(f"added watch {watch.id}: {redact(watch.url)} every {format_duration(watch.interval_s)} "
          f"(first check at {ts(watch.next_due)})" + (f", {_region(watch.selector)}" if watch.selector else ""))
    if warning:
        print(f"monitor: warning: {warning}", file=sys.stderr)


def watch_dict(watch: Watch) -> dict:
    """A watch as ``watch list --json`` and the web API show it (its password masked)."""
    return {"id": watch.id, "url": redact(watch.url), "name": watch.name, "tag": watch.tag, "interval": format_duration(watch.interval_s),
            "enabled": watch.enabled, "last_check": watch.last_check, "last_status": watch.last_status,
            "last_elapsed_ms": watch.last_elapsed_ms, "cost_ms": watch.cost_ms, "links_known": watch.links_known, "new_links": watch.new_links,
            "next_due": watch.next_due, "in_flight": watch.in_flight_since is not None, "selector": watch.selector,
            "ignore_params": watch.ignore_params.split(), "volatile_params": watch.volatile_params.split()}


def status_line(watch: Watch, disabled: dict[str, str]) -> str:
    """The last status, with why a skipped watch's host is disabled and how to lift it."""
    status = watch.last_status or "never checked"
    host = urlsplit(watch.url).hostname or ""
    if status.startswith("skipped") and host in disabled:
        status += f" ({disabled[host]}; `monitor hosts enable {host}` lifts it)"
    if watch.volatile_params:
        names = ", ".join(f"?{name}" for name in watch.volatile_params.split())
        status += f"; links compared without {names} (changes on every check)"
    return status


def cmd_watch_list(args, config, store) -> None:
    watches = store.list_watches()
    if args.json:
        for watch in watches:
            print_json(watch_dict(watch))
        return
    if not watches:
        print("no watches yet: add one with `monitor watch add https://example.org/`")
        return
    now = time.time()
    disabled = {c.host: f"{c.reason}, {c.strikes} in a row" for c in store.host_cooldowns(now)}
    rows = [[str(w.id), redact(w.url), format_duration(w.interval_s) + ("" if w.enabled else " (off)"),
             format_age(now - w.last_check if w.last_check else None), status_line(w, disabled),
             str(w.links_known), str(w.new_links), cost(w.cost_ms)] for w in watches]
    print(table(["ID", "URL", "INTERVAL", "LAST CHECK", "LAST STATUS", "LINKS", "NEW", "COST"], rows))



def cmd_watch_remove(args, config, store) -> None:
    watch = find_watch(store, args.ref)
    store.remove_watch(watch.id)
    print(f"removed watch {watch.id}: {redact(watch.url)}")


def cmd_watch_enable(args, config, store) -> None:
    watch = store.update_watch(watch_id_of(store, args.id), enabled=args.command == "enable")
    print(f"watch {watch.id} {'enabled' if watch.enabled else 'disabled'}")


class WatchChanges(NamedTuple):
    """``watch set``'s changes, checked (:func:`checked_changes`); None: left as it is."""
    interval_s: int | None
    selector: str | None  # '' for the whole page
    ignore_params: list[str] | None
    name: str | None  # '' for none
    tag: str | None  # '' for none


def checked_changes(config, interval: str | None, selector: str | None, ignore_params: list[str] | None,
                    name: str | None = None, tag: str | None = None) -> WatchChanges:
    """``watch set``'s changes, all checked before any is made (UsageError on bad input).
    Shared with the web API."""
    interval_s = None if interval is None else interval_seconds(interval, config)
    checked = checked_selector(selector) if selector else selector  # None and "" pass as they are
    params = None if ignore_params is None else checked_params(ignore_params)
    return WatchChanges(interval_s, checked, params, checked_label("name", name), checked_label("tag", tag))


def apply_changes(store: Store, watch_id: int, changes: WatchChanges, enabled: bool | None = None,
                  forget_volatile: bool = False) -> Watch:
    """Make checked changes (and enable or disable the watch); the watch as it is then.
    Shared by ``watch set`` and the web API, so both change a watch in the same order."""
    if forget_volatile:
        store.forget_volatile_params(watch_id)
    if changes.ignore_params is not None:
        store.set_ignore_params(watch_id, changes.ignore_params)
    if enabled is not None or any(value is not None for value in (changes.interval_s, changes.name, changes.tag)):
        store.update_watch(watch_id, enabled=enabled, interval_s=changes.interval_s, name=changes.name,
                           tag=changes.tag)
    if changes.selector is not None:
        store.set_selector(watch_id, changes.selector)
    return store.get_watch(watch_id)


def cmd_watch_set(args, config, store) -> None:
    if (args.interval is None and args.selector is None and args.ignore_param is None and not args.forget_volatile
            and args.name is None and args.tag is None):
        raise UsageError("nothing to set: give --interval, --selector, --ignore-param, --forget-volatile, --name or --tag")
    watch_id = watch_id_of(store, args.id)
    changes = checked_changes(config, args.interval, args.selector, args.ignore_param, args.name, args.tag)
    before = store.get_watch(watch_id).selector
    watch = apply_changes(store, watch_id, changes, forget_volatile=args.forget_volatile)
    for field, value, shown in (("name", changes.name, watch.name), ("tag", changes.tag, watch.tag)):
        if value is not None:
            print(f"watch {watch.id} now {'has no ' + field if shown is None else f'has {field} {shown!r}'}")
    if args.forget_volatile:
        print(f"watch {watch.id} compares its links with every parameter again, but those it ignores itself "
              "(known links stay known)")
    if changes.ignore_params is not None:
        params = changes.ignore_params
        print(f"watch {watch.id} now compares its links without " +
              (", ".join(f"?{name}" for name in params) if params else "no parameter of its own") +
              " (known links stay known)")
    if changes.interval_s is not None:
        print(f"watch {watch.id} now every {format_duration(watch.interval_s)}")
    if changes.selector is not None:
        if watch.selector == before:
            print(f"watch {watch.id} keeps {_region(watch.selector)} (unchanged)")
        else:
            print(f"watch {watch.id} now keeps {_region(watch.selector)}: checked again at once, and the links "
                  "it finds there are recorded without alerts (the region's new links alert from then on)")


class _Progress:
    """``importing 1200/5000`` on one line of stderr, rewritten in place: only on a terminal
    (a log or a pipe would get every step as its own line) and only for a long import (a
    short one is over before anyone could read it)."""

    AFTER_ROWS = 200

    def __init__(self, total: int) -> None:
        self.total = total
        self.shown = total > self.AFTER_ROWS and sys.stderr.isatty()
        self.width = 0

    def step(self, done: int) -> None:
        if self.shown:
            text = f"importing {done}/{self.total} ({100 * done // self.total}%)"
            self.width = len(text)
            print(f"\r{text}", end="", file=sys.stderr, flush=True)

    def say(self, line: str) -> None:
        """Print a line of its own on stderr where the counter was (the next step redraws it)."""
        self.clear()
        print(line, file=sys.stderr)

    def clear(self) -> None:
        if self.width:
            print("\r" + " " * self.width + "\r", end="", file=sys.stderr, flush=True)
            self.width = 0


def checked_format(fmt: str) -> str:
    """An import format's name (``--format``): auto or one of the readers (UsageError otherwise)."""
    if fmt not in ("auto", *imports.READERS):
        raise UsageError(f"unknown format {fmt[:40]!r}: one of auto, {', '.join(imports.READERS)}")
    return fmt


def import_rows(data: bytes, source: str, fmt: str = "auto") -> list[imports.Row]:
    """The entries of an import file (``source`` names it, and its extension may tell its
    format); UsageError when the file as a whole cannot be read."""
    try:
        return imports.read(data, source, checked_format(fmt))
    except imports.ImportFileError as exc:
        raise UsageError(f"cannot read {source}: {exc}") from None


@dataclasses.dataclass
class Imported:
    """What an import did: ``messages`` are the lines about single entries (refused, or
    with settings that have no equivalent here), each starting with where the entry is."""
    added: int = 0
    duplicates: int = 0
    invalid: int = 0
    messages: list[str] = dataclasses.field(default_factory=list)


def _import_row(config, store: Store, row: imports.Row) -> None:
    if row.refused:
        raise UsageError(row.refused)
    interval = interval_seconds(row.interval, config)
    url, _ = watch_url(row.url, config)
    if urlsplit(row.url).password == MASK:
        raise UsageError("its password is masked (export never prints one): add it with the password")
    store.add_watch(url, interval, row.name, row.tag, enabled=row.enabled)


def import_watches(config, store: Store, rows: list[imports.Row], say: Callable[[str], None] = lambda line: None,
                   step: Callable[[int], None] = lambda done: None) -> Imported:
    """Add a watch for each entry the checks of ``watch add`` let pass; a duplicate is
    skipped. ``say`` gets each message as it comes, ``step`` the count of entries done."""
    imported = Imported()

    def tell(line: str) -> None:
        imported.messages.append(line)
        say(line)

    for done, row in enumerate(rows, start=1):
        step(done)
        try:
            _import_row(config, store, row)
        except Duplicate:
            imported.duplicates += 1
        except UsageError as exc:
            imported.invalid += 1
            tell(f"{row.where}: refused: {exc}")
        else:
            imported.added += 1
            for note in row.notes:
                tell(f"{row.where}: {note}")
    return imported


def cmd_watch_import(args, config, store) -> None:
    checked_format(args.format)  # (before the file: a mistyped format is said first)
    try:
        data = Path(args.file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc}") from None
    rows = import_rows(data, args.file, args.format)
    progress = _Progress(len(rows))
    imported = import_watches(config, store, rows, progress.say, progress.step)
    progress.clear()
    print(f"imported: {imported.added} added, {imported.duplicates} skipped as duplicates, "
          f"{imported.invalid} refused as invalid")


def export_watches(store: Store, out: TextIO) -> None:
    """Write the watch list to ``out`` as CSV that ``watch import`` reads back (passwords masked)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["url", "interval", "name", "tag", "enabled"])
    for watch in store.list_watches():
        writer.writerow([redact(watch.url), format_duration(watch.interval_s), watch.name or "", watch.tag or "",
                         int(watch.enabled)])


def cmd_watch_export(args, config, store) -> None:
    export_watches(store, sys.stdout)


def cmd_watch_recheck(args, config, store) -> None:
    if args.all == (args.ref is not None):
        raise UsageError("give either a watch ID|URL or --all")
    ids = store.enabled_watch_ids() if args.all else [find_watch(store, args.ref).id]
    # The scheduler publishes due watches (with their validators) within a tick.
    busy = store.make_due(ids, time.time())
    print(f"{len(ids)} watch(es) due now: the scheduler queues them within a second"
          + (f" ({busy} already being checked)" if busy else ""))
    from monitor import stack  # (supervisord's client: imported only here)
    if not stack.is_running(config):
        print("monitor: warning: the stack is not running: they are checked once `monitor up` starts it",
              file=sys.stderr)


# --- links and alerts ---------------------------------------------------------------------
def cmd_links(args, config, store) -> None:
    watch = find_watch(store, args.ref)
    links = store.links(watch.id, args.limit)
    for link in links:
        if args.json:
            print_json({"watch_id": watch.id, "url": link.url, "text": link.text, "code": link.code, "first_seen": link.first_seen})
        else:
            print(f"{ts(link.first_seen)}  {link.url}  {link.text}")
    if not links and not args.json:
        print(f"no links known yet for watch {watch.id} (last status: {watch.last_status or 'never checked'})")


def alerts_since(duration: str) -> float:
    """The time ``--since DURATION`` means (``1h``: an hour ago); UsageError if unreadable."""
    try:
        return time.time() - parse_duration(duration)
    except ValueError as exc:
        raise UsageError(str(exc).replace("interval", "duration")) from None


def cmd_alerts(args, config, store) -> None:
    watch_id = watch_id_of(store, args.watch) if args.watch else None
    since = alerts_since(args.since) if args.since else 0.0
    last = 0
    while True:
        for rowid, alert in store.alerts(since, watch_id, after_rowid=last):
            last = rowid
            if args.json:
                print_json(alert)
            else:
                print(f"{ts(alert['first_seen'])}  [{alert['watch_id']}] {alert['url']}  {alert['text']}", flush=True)
        if not args.follow:
            return
        sys.stdout.flush()
        time.sleep(1.0)

"""``monitor watch ...``, ``monitor links`` and ``monitor alerts``: the watch list and what it found."""
from __future__ import annotations

import csv
import io
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from monitor.cli.common import (
    UsageError,
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
from monitor.store import Duplicate
from monitor.urls import MASK, redact


# --- watch ---------------------------------------------------------------------------------
def cmd_watch_add(args, config, store) -> None:
    interval = interval_seconds(args.interval, config)
    url, warning = watch_url(args.url, config)
    try:
        watch = store.add_watch(url, interval, args.name, args.tag)
    except Duplicate as exc:
        raise UsageError(str(exc)) from None
    print(f"added watch {watch.id}: {redact(watch.url)} every {format_duration(watch.interval_s)} "
          f"(first check at {ts(watch.next_due)})")
    if warning:
        print(f"monitor: warning: {warning}", file=sys.stderr)


def _watch_dict(watch) -> dict:
    return {"id": watch.id, "url": redact(watch.url), "name": watch.name, "tag": watch.tag, "interval": format_duration(watch.interval_s),
            "enabled": watch.enabled, "last_check": watch.last_check, "last_status": watch.last_status,
            "last_elapsed_ms": watch.last_elapsed_ms, "cost_ms": watch.cost_ms, "links_known": watch.links_known, "new_links": watch.new_links,
            "next_due": watch.next_due, "in_flight": watch.in_flight_since is not None}


def _status_line(watch, disabled: dict[str, str]) -> str:
    """The last status, with why a skipped watch's host is disabled and how to lift it."""
    status = watch.last_status or "never checked"
    host = urlsplit(watch.url).hostname or ""
    if status.startswith("skipped") and host in disabled:
        status += f" ({disabled[host]}; `monitor hosts enable {host}` lifts it)"
    return status


def cmd_watch_list(args, config, store) -> None:
    watches = store.list_watches()
    if args.json:
        for watch in watches:
            print_json(_watch_dict(watch))
        return
    if not watches:
        print("no watches yet: add one with `monitor watch add https://example.org/`")
        return
    now = time.time()
    disabled = {c.host: f"{c.reason}, {c.strikes} in a row" for c in store.host_cooldowns(now)}
    rows = [[str(w.id), redact(w.url), format_duration(w.interval_s) + ("" if w.enabled else " (off)"),
             format_age(now - w.last_check if w.last_check else None), _status_line(w, disabled),
             str(w.links_known), str(w.new_links), cost(w.cost_ms)] for w in watches]
    print(table(["ID", "URL", "INTERVAL", "LAST CHECK", "LAST STATUS", "LINKS", "NEW", "COST"], rows))



def cmd_watch_remove(args, config, store) -> None:
    watch = find_watch(store, args.ref)
    store.remove_watch(watch.id)
    print(f"removed watch {watch.id}: {redact(watch.url)}")


def cmd_watch_enable(args, config, store) -> None:
    watch = store.update_watch(watch_id_of(store, args.id), enabled=args.command == "enable")
    print(f"watch {watch.id} {'enabled' if watch.enabled else 'disabled'}")


def cmd_watch_set(args, config, store) -> None:
    if args.interval is None:
        raise UsageError("nothing to set: give --interval")
    watch = store.update_watch(watch_id_of(store, args.id), interval_s=interval_seconds(args.interval, config))
    print(f"watch {watch.id} now every {format_duration(watch.interval_s)}")


def _import_rows(text: str) -> list[tuple[int, dict[str, str]]]:
    """``(line number, row)`` of an import file: plain URLs, or CSV with the columns
    url,interval,name,tag,enabled (a header line naming them is optional)."""
    reader = csv.reader(io.StringIO(text))
    rows = [(reader.line_num, row) for row in reader
            if row and row[0].strip() and not row[0].lstrip().startswith("#")]
    keys = ["url", "interval", "name", "tag", "enabled"]
    if rows and rows[0][1][0].strip().lower() == "url":
        keys = [cell.strip().lower() for cell in rows[0][1]]
        rows = rows[1:]
    return [(line, dict(zip(keys, (cell.strip() for cell in row)))) for line, row in rows]


def cmd_watch_import(args, config, store) -> None:
    try:
        text = Path(args.file).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {args.file}: {exc}") from None
    added = duplicates = invalid = 0
    for line, row in _import_rows(text):
        try:
            interval = interval_seconds(row.get("interval") or None, config)
            url, _ = watch_url(row.get("url", ""), config)
            if urlsplit(row["url"]).password == MASK:
                raise UsageError("its password is masked (export never prints one): add it with the password")
            enabled = row.get("enabled", "").lower() not in ("0", "false", "no", "off")
            store.add_watch(url, interval, row.get("name") or None, row.get("tag") or None, enabled=enabled)
            added += 1
        except Duplicate:
            duplicates += 1
        except UsageError as exc:
            invalid += 1
            print(f"line {line}: refused: {exc}", file=sys.stderr)
    print(f"imported: {added} added, {duplicates} skipped as duplicates, {invalid} refused as invalid")


def cmd_watch_export(args, config, store) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["url", "interval", "name", "tag", "enabled"])
    for watch in store.list_watches():
        writer.writerow([redact(watch.url), format_duration(watch.interval_s), watch.name or "", watch.tag or "", int(watch.enabled)])


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


def cmd_alerts(args, config, store) -> None:
    watch_id = watch_id_of(store, args.watch) if args.watch else None
    since = 0.0
    if args.since:
        try:
            since = time.time() - parse_duration(args.since)
        except ValueError as exc:
            raise UsageError(str(exc).replace("interval", "duration")) from None
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

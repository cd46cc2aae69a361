"""The ``monitor`` command line: edit the watch list, see what was found, run the stack.

Exit codes: 0 success, 1 runtime failure (broker or supervisord unreachable, fetch failed),
2 usage error (bad URL, unknown id, duplicate, bad interval). Errors are one line on stderr.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from monitor import amqp, broker, config as configuration, deadletters, stack
from monitor.check import check_page
from monitor.durations import format_age, format_duration, parse_duration
from monitor.log import get_logger
from monitor.messages import Job
from monitor.store import Duplicate, NotFound, Store, open_store, upgrade
from monitor.urls import BadURL, Unresolvable, check_public, redact, validate_watch_url


class UsageError(Exception):
    """Bad input from the user: exit code 2."""


class RuntimeFailure(Exception):
    """Something outside the input failed (broker, supervisord, the network): exit code 1."""


def _print_json(obj: dict) -> None:
    print(json.dumps(obj, ensure_ascii=False))


def _ts(value: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value)) if value else "-"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]]
    return "\n".join(lines)


def _watch_url(url: str, config: configuration.Config) -> tuple[str, str | None]:
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


def _interval(text: str | None, config: configuration.Config) -> int:
    if text is None:
        return config.default_interval
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _find(store: Store, ref: str):
    try:
        return store.find_watch(ref)
    except NotFound as exc:
        raise UsageError(str(exc)) from None


def _watch_id(store: Store, ref: str) -> int:
    return _find(store, ref).id


# --- watch ---------------------------------------------------------------------------------
def cmd_watch_add(args, config, store) -> None:
    interval = _interval(args.interval, config)
    url, warning = _watch_url(args.url, config)
    try:
        watch = store.add_watch(url, interval, args.name, args.tag)
    except Duplicate as exc:
        raise UsageError(str(exc)) from None
    print(f"added watch {watch.id}: {watch.url} every {format_duration(watch.interval_s)} "
          f"(first check at {_ts(watch.next_due)})")
    if warning:
        print(f"monitor: warning: {warning}", file=sys.stderr)


def _watch_dict(watch) -> dict:
    return {"id": watch.id, "url": watch.url, "name": watch.name, "tag": watch.tag, "interval": format_duration(watch.interval_s),
            "enabled": watch.enabled, "last_check": watch.last_check, "last_status": watch.last_status,
            "last_elapsed_ms": watch.last_elapsed_ms, "cost_ms": watch.cost_ms, "links_known": watch.links_known, "new_links": watch.new_links,
            "next_due": watch.next_due, "in_flight": watch.in_flight_since is not None}


def cmd_watch_list(args, config, store) -> None:
    watches = store.list_watches()
    if args.json:
        for watch in watches:
            _print_json(_watch_dict(watch))
        return
    if not watches:
        print("no watches yet: add one with `monitor watch add https://example.org/`")
        return
    now = time.time()
    rows = [[str(w.id), w.url, format_duration(w.interval_s) + ("" if w.enabled else " (off)"),
             format_age(now - w.last_check if w.last_check else None), w.last_status or "never checked",
             str(w.links_known), str(w.new_links), _cost(w.cost_ms)] for w in watches]
    print(_table(["ID", "URL", "INTERVAL", "LAST CHECK", "LAST STATUS", "LINKS", "NEW", "COST"], rows))


def _cost(cost_ms: float | None) -> str:
    """A site's weight: its moving-average fetch time."""
    return "-" if cost_ms is None else f"{cost_ms:.0f} ms"


def cmd_watch_remove(args, config, store) -> None:
    watch = _find(store, args.ref)
    store.remove_watch(watch.id)
    print(f"removed watch {watch.id}: {watch.url}")


def cmd_watch_enable(args, config, store) -> None:
    watch = store.update_watch(_watch_id(store, args.id), enabled=args.command == "enable")
    print(f"watch {watch.id} {'enabled' if watch.enabled else 'disabled'}")


def cmd_watch_set(args, config, store) -> None:
    if args.interval is None:
        raise UsageError("nothing to set: give --interval")
    watch = store.update_watch(_watch_id(store, args.id), interval_s=_interval(args.interval, config))
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
            interval = _interval(row.get("interval") or None, config)
            url, _ = _watch_url(row.get("url", ""), config)
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
        writer.writerow([watch.url, format_duration(watch.interval_s), watch.name or "", watch.tag or "", int(watch.enabled)])


def cmd_watch_recheck(args, config, store) -> None:
    if args.all == (args.ref is not None):
        raise UsageError("give either a watch ID|URL or --all")
    watches = [w for w in store.list_watches() if w.enabled] if args.all else [_find(store, args.ref)]
    log = get_logger("cli")
    try:
        connection = amqp.connect(config, log, attempts=3)
    except amqp.BrokerUnavailable as exc:
        raise RuntimeFailure(str(exc)) from None
    try:
        channel = amqp.open_channel(connection, config)
        now = time.time()
        for watch in watches:
            amqp.publish(channel, amqp.JOB_QUEUE, Job(watch.url, watch.id, now).to_bytes())
        store.mark_in_flight([watch.id for watch in watches], now)
    finally:
        connection.close()
    print(f"queued {len(watches)} watch(es) for an immediate check")


# --- links and alerts ---------------------------------------------------------------------
def cmd_links(args, config, store) -> None:
    watch = _find(store, args.ref)
    links = store.links(watch.id, args.limit)
    for link in links:
        if args.json:
            _print_json({"watch_id": watch.id, "url": link.url, "text": link.text, "code": link.code, "first_seen": link.first_seen})
        else:
            print(f"{_ts(link.first_seen)}  {link.url}  {link.text}")
    if not links and not args.json:
        print(f"no links known yet for watch {watch.id} (last status: {watch.last_status or 'never checked'})")


def cmd_alerts(args, config, store) -> None:
    watch_id = _watch_id(store, args.watch) if args.watch else None
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
                _print_json(alert)
            else:
                print(f"{_ts(alert['first_seen'])}  [{alert['watch_id']}] {alert['url']}  {alert['text']}", flush=True)
        if not args.follow:
            return
        sys.stdout.flush()
        time.sleep(1.0)


# --- the stack -------------------------------------------------------------------------------
def _queue_depths(config) -> dict[str, tuple[int, int | None]]:
    if config.local_broker:
        return broker.queue_depths(config)
    connection = amqp.connect(config, get_logger("cli"), attempts=1)
    try:
        channel = amqp.open_channel(connection, config)
        # A passive declare reports ready messages only; unacked needs the management API.
        return {queue: (channel.queue_declare(queue, passive=True).method.message_count, None)
                for queue in (amqp.JOB_QUEUE, amqp.TASK_QUEUE, amqp.DEAD_LETTER)}
    finally:
        connection.close()


def _process_name(info: dict) -> str:
    """``worker:worker_00`` for a process of a group, plain ``processor`` otherwise (as supervisorctl)."""
    return info["name"] if info["group"] == info["name"] else f"{info['group']}:{info['name']}"


def cmd_status(args, config, store) -> None:
    now = time.time()
    try:
        procs = stack.processes(config)
    except stack.StackError as exc:
        procs, proc_error = [], str(exc)
    else:
        proc_error = None
    try:
        depths, depth_error = _queue_depths(config), None
    except (broker.BrokerError, amqp.BrokerUnavailable, *amqp.RECOVERABLE, OSError) as exc:
        depths, depth_error = {}, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    summary = store.summary(now, config.job_timeout)
    states = [w.state for w in store.list_workers()]
    fleet = {state: states.count(state) for state in ("alive", "lost", "stopped")}
    cooldowns = store.cooldowns(now)
    costly = sorted((w for w in store.list_watches() if w.cost_ms is not None), key=lambda w: -w.cost_ms)
    if args.json:
        _print_json({"processes": [{"name": _process_name(p), "state": p["statename"], "pid": p["pid"]} for p in procs],
                     "queues": {q: {"ready": r, "unacked": u} for q, (r, u) in depths.items()}, "watches": summary,
                     "workers": fleet, "hosts_in_cooldown": cooldowns,
                     "costliest": [{"id": w.id, "url": w.url, "cost_ms": w.cost_ms} for w in costly[:5]]})
        return
    where = f"local node on 127.0.0.1:{config.local_amqp_port}" if config.local_broker else redact(config.broker_url)
    print(f"home: {config.home}   broker: {where}")
    print("\nprocesses:")
    if proc_error:
        print(f"  {proc_error}")
    for p in procs:
        print(f"  {_process_name(p):<20} {p['statename']:<9} {p['description']}")
    print("\nqueues:")
    if depth_error:
        print(f"  unavailable: {depth_error}")
    for queue in (amqp.JOB_QUEUE, amqp.TASK_QUEUE, amqp.DEAD_LETTER):
        if queue in depths:
            ready, unacked = depths[queue]
            print(f"  {queue:<12} ready {ready:<7} unacked {'?' if unacked is None else unacked}")
        elif not depth_error:
            print(f"  {queue:<12} not declared yet (the pipeline declares it when it connects)")
    print(f"\nwatches: {summary['watches']} ({summary['enabled']} enabled), due {summary['due']}, "
          f"in flight {summary['in_flight']}, failing {summary['failing']}")
    print(f"alerts in the last hour: {summary['alerts_last_hour']}")
    print(f"workers: {fleet['alive']} alive, {fleet['lost']} lost, {fleet['stopped']} stopped (`monitor workers`)")
    if cooldowns:
        print("hosts in cooldown: " + ", ".join(f"{host} until {_ts(until)}" for host, until in sorted(cooldowns.items())))
    if costly:
        print("costliest sites: " + ", ".join(f"{w.url} {_cost(w.cost_ms)}" for w in costly[:3]))


def cmd_up(args, config, store) -> None:
    try:
        stack.up(config)
        infos = stack.wait_started(config)
    except stack.StackError as exc:
        raise RuntimeFailure(str(exc)) from None
    late = [_process_name(info) + " " + info["statename"] for info in infos
            if info["statename"] not in ("RUNNING", "STOPPED")]
    if config.local_broker and not broker.wait_accepting(config):
        late.append(f"the local broker does not accept connections on 127.0.0.1:{config.local_amqp_port}")
    print(f"stack running (home {config.home}); `monitor status` shows it, `monitor down` stops it")
    if late:
        raise RuntimeFailure("not running: " + ", ".join(late) + f" (see {config.log_dir})")


def cmd_down(args, config, store) -> None:
    try:
        stopped = stack.down(config)
    except stack.StackError as exc:
        raise RuntimeFailure(str(exc)) from None
    print("stack stopped" if stopped else "stack was not running")


def cmd_check(args, config, store) -> None:
    url, _ = _watch_url(args.url, config)
    task = check_page(Job(url, 0), config)
    if task.status != "ok":
        raise RuntimeFailure(f"{url}: {task.error}")
    for link in task.context:
        if args.json:
            _print_json(link)
        else:
            print(f"{link['url']}  {link['text']}")
    if not args.json:
        print(f"# {len(task.context)} links from {task.final_url} in {task.elapsed_ms} ms (HTTP {task.http_status})", file=sys.stderr)


# --- proxies and workers -----------------------------------------------------------------------
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def _proxy_url(url: str) -> str:
    parts = urlsplit((url or "").strip())
    if parts.scheme.lower() not in PROXY_SCHEMES:
        raise UsageError(f"{redact(url)!r}: a proxy URL starts with one of {', '.join(s + '://' for s in PROXY_SCHEMES)}")
    try:
        if not parts.hostname or not parts.port:
            raise ValueError
    except ValueError:
        raise UsageError(f"{redact(url)!r}: a proxy URL needs a host and a port, e.g. http://user:pass@10.0.0.5:3128") from None
    return url.strip()


def _find_proxy(store: Store, ref: str):
    if ref.isdigit():
        try:
            return store.get_proxy(int(ref))
        except NotFound as exc:
            raise UsageError(str(exc)) from None
    for proxy in store.list_proxies():
        if proxy.url == ref:
            return proxy
    raise UsageError(f"no proxy {redact(ref)} in the pool")


def cmd_proxy_add(args, config, store) -> None:
    url = _proxy_url(args.url)
    try:
        proxy = store.add_proxy(url)
    except Duplicate as exc:
        raise UsageError(str(exc)) from None
    print(f"added proxy {proxy.id}: {redact(proxy.url)}")


def cmd_proxy_list(args, config, store) -> None:
    proxies = store.list_proxies()
    if args.json:
        for p in proxies:
            _print_json({"id": p.id, "url": redact(p.url), "leased_to": p.leased_to, "last_error": p.last_error,
                         "requests": p.requests, "refusals": p.refusals})
        return
    if not proxies:
        print("no proxies: workers fetch directly (add one with `monitor proxy add http://user:pass@host:port`)")
        return
    print(_table(["ID", "URL", "LEASED TO", "LAST ERROR", "REQUESTS", "REFUSALS"],
                 [[str(p.id), redact(p.url), p.leased_to or "-", (p.last_error or "-")[:60], str(p.requests),
                   str(p.refusals)] for p in proxies]))


def cmd_proxy_remove(args, config, store) -> None:
    proxy = _find_proxy(store, args.ref)
    store.remove_proxy(proxy.id)
    print(f"removed proxy {proxy.id}: {redact(proxy.url)}")


def cmd_proxy_test(args, config, store) -> None:
    proxy_url = _find_proxy(store, args.ref).url if args.ref.isdigit() else _proxy_url(args.ref)
    page, _ = _watch_url(args.page, config)
    task = check_page(Job(page, 0), config, proxy=proxy_url)
    if task.status != "ok":
        raise RuntimeFailure(f"failed through {redact(proxy_url)}: {task.error}")
    print(f"ok through {redact(proxy_url)}: {page} answered HTTP {task.http_status} with {len(task.context)} links "
          f"in {task.elapsed_ms} ms")


def cmd_workers(args, config, store) -> None:
    workers = store.list_workers()
    now = time.time()
    if args.json:
        for w in workers:
            _print_json(dataclasses.asdict(w))
        return
    if not workers:
        print("no worker has sent a heartbeat yet")
        return
    print(_table(["ID", "HOST", "PID", "STATE", "LAST HEARTBEAT", "JOBS", "ERRORS", "PROXIES", "CURRENT JOB"],
                 [[w.id, w.host, str(w.pid), w.state, format_age(now - w.last_heartbeat), str(w.jobs_done), str(w.errors),
                   ",".join(map(str, w.proxies)) or "-", w.current_job or "-"] for w in workers]))


def _dead_letters(config):
    try:
        return deadletters.DeadLetterQueue(config)
    except amqp.BrokerUnavailable as exc:
        raise RuntimeFailure(str(exc)) from None


def cmd_dlq_list(args, config, store) -> None:
    with _dead_letters(config) as dlq:
        letters = dlq.list()
    for letter in letters:
        if args.json:
            _print_json({"id": letter.id, "queue": letter.queue, "reason": letter.reason,
                         "body": letter.body.decode("utf-8", errors="replace")})
        else:
            print(f"{letter.id}  from {letter.queue} ({letter.reason})  {letter.preview()}")
    if not args.json:
        print(f"{len(letters)} dead letter(s)", file=sys.stderr)


def cmd_dlq_replay(args, config, store) -> None:
    if args.all == bool(args.ids):
        raise UsageError("give dead-letter IDs (see `monitor dlq list`) or --all")
    with _dead_letters(config) as dlq:
        replayed = dlq.replay(None if args.all else set(args.ids))
    missing = set(args.ids) - {letter.id for letter in replayed}
    print(f"replayed {len(replayed)} message(s)")
    if missing:
        raise UsageError(f"not in dead_letter (or not replayable): {', '.join(sorted(missing))}")


def cmd_dlq_purge(args, config, store) -> None:
    with _dead_letters(config) as dlq:
        print(f"purged {dlq.purge()} dead letter(s)")


def cmd_db_upgrade(args, config, store) -> None:
    plain = Store(config.db_path)  # not open_store: that would apply the migrations before we can report them
    try:
        applied = upgrade(plain.conn)
    finally:
        plain.close()
    print("applied: " + ", ".join(applied) if applied else "database is up to date")


def cmd_demo(args, config, store) -> None:
    """A stack of its own under $MONITOR_HOME/demo, watching a local site that keeps publishing."""
    from monitor.demo import LocalSite

    demo = dataclasses.replace(config, home=config.home / "demo", allow_private=True, amqp_port=None)
    site = LocalSite().start()
    url = site.add_page("/", [(f"/stories/{n}", f"Story number {n}") for n in range(1, 4)])
    site.autopublish("/", every=args.every)
    print(f"demo site on {url}: a new story every {args.every:g}s; starting a stack under {demo.home}", flush=True)
    demo_store = open_store(demo.db_path)
    watch = None
    try:
        stack.up(demo)
        watch = demo_store.add_watch(url, 5, name="demo")
        print(f"watching it as watch {watch.id} every 5s: first check is the baseline, then alerts follow "
              f"(Ctrl-C to stop)", flush=True)
        deadline = time.time() + args.duration
        last = 0
        while time.time() < deadline:
            for rowid, alert in demo_store.alerts(0, watch.id, after_rowid=last):
                last = rowid
                print(f"{_ts(alert['first_seen'])}  NEW  {alert['url']}  {alert['text']}", flush=True)
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    except stack.StackError as exc:
        raise RuntimeFailure(str(exc)) from None
    finally:
        site.stop()
        if watch is not None:
            demo_store.remove_watch(watch.id)  # its site is gone; the next demo starts afresh
        stack.down(demo)
        demo_store.close()
        print("demo stopped; its data stays in " + str(demo.home))


# --- argument parsing ------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="monitor", description="Watch homepages; get an alert for every newly published link.")
    sub = parser.add_subparsers(dest="group", required=True, metavar="COMMAND")

    watch = sub.add_parser("watch", help="edit the watch list").add_subparsers(dest="command", required=True, metavar="ACTION")
    p = watch.add_parser("add", help="watch a homepage")
    p.add_argument("url")
    p.add_argument("--interval", help="how often to check: 30s, 5m, 2h, 1d (default 5m)")
    p.add_argument("--name")
    p.add_argument("--tag")
    p.set_defaults(func=cmd_watch_add)
    p = watch.add_parser("list", help="the watch list with its last results")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=cmd_watch_list)
    p = watch.add_parser("remove", help="stop watching (ID or URL); its links and alerts go too")
    p.add_argument("ref", metavar="ID|URL")
    p.set_defaults(func=cmd_watch_remove)
    for name in ("enable", "disable"):
        p = watch.add_parser(name, help=f"{name} checking a watch")
        p.add_argument("id", metavar="ID|URL")
        p.set_defaults(func=cmd_watch_enable)
    p = watch.add_parser("set", help="change a watch's interval")
    p.add_argument("id", metavar="ID|URL")
    p.add_argument("--interval")
    p.set_defaults(func=cmd_watch_set)
    p = watch.add_parser("import", help="add watches from a file: one URL per line, or CSV url,interval,name,tag")
    p.add_argument("file")
    p.set_defaults(func=cmd_watch_import)
    watch.add_parser("export", help="print the watch list as CSV (import reads it back)").set_defaults(func=cmd_watch_export)
    p = watch.add_parser("recheck", help="check now, regardless of the schedule")
    p.add_argument("ref", nargs="?", metavar="ID|URL")
    p.add_argument("--all", action="store_true", help="every enabled watch")
    p.set_defaults(func=cmd_watch_recheck)

    p = sub.add_parser("links", help="links known for a watch, newest first")
    p.add_argument("ref", metavar="ID|URL")
    p.add_argument("--limit", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_links)
    p = sub.add_parser("alerts", help="new links found")
    p.add_argument("--watch", metavar="ID|URL")
    p.add_argument("--since", metavar="DURATION", help="e.g. 1h, 2d")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new alerts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_alerts)
    p = sub.add_parser("status", help="processes, queue depths, watches due/in flight/failing, recent alerts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)
    sub.add_parser("up", help="start the whole stack under supervisord").set_defaults(func=cmd_up)
    sub.add_parser("down", help="stop the whole stack").set_defaults(func=cmd_down)
    p = sub.add_parser("ctl", help="run supervisorctl against this stack (e.g. `monitor ctl status`)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=None)
    p = sub.add_parser("check", help="fetch one page once and print its links (touches no store)")
    p.add_argument("url")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check, needs_store=False)
    proxy = sub.add_parser("proxy", help="the proxy pool (VPN exits)").add_subparsers(dest="command", required=True, metavar="ACTION")
    p = proxy.add_parser("add", help="add a proxy: http://, https://, socks5:// with optional user:password@")
    p.add_argument("url")
    p.set_defaults(func=cmd_proxy_add)
    p = proxy.add_parser("list", help="proxies (passwords masked), lease, last error, requests, refusals")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_proxy_list)
    p = proxy.add_parser("remove", help="remove a proxy (ID or URL)")
    p.add_argument("ref", metavar="ID|URL")
    p.set_defaults(func=cmd_proxy_remove)
    p = proxy.add_parser("test", help="fetch a page through a proxy (ID or URL) and say how it went")
    p.add_argument("ref", metavar="ID|URL")
    p.add_argument("--page", default="https://example.org/", help="the page to fetch (default https://example.org/)")
    p.set_defaults(func=cmd_proxy_test)
    p = sub.add_parser("workers", help="the worker fleet: state, last heartbeat, jobs, proxies")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_workers)
    dlq = sub.add_parser("dlq", help="messages the pipeline refused").add_subparsers(dest="command", required=True, metavar="ACTION")
    p = dlq.add_parser("list", help="show dead letters: id, origin queue, reason, body")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_dlq_list, needs_store=False)
    p = dlq.add_parser("replay", help="send dead letters back to the queue they came from")
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--all", action="store_true")
    p.set_defaults(func=cmd_dlq_replay, needs_store=False)
    dlq.add_parser("purge", help="delete every dead letter").set_defaults(func=cmd_dlq_purge, needs_store=False)
    db = sub.add_parser("db", help="database maintenance").add_subparsers(dest="command", required=True, metavar="ACTION")
    db.add_parser("upgrade", help="apply pending migrations").set_defaults(func=cmd_db_upgrade, needs_store=False)
    p = sub.add_parser("demo", help="run a local site that publishes links, watch it, show alerts")
    p.add_argument("--every", type=float, default=3.0, help="seconds between new stories (default 3)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds to run (default 60)")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = configuration.load()
    except configuration.ConfigError as exc:
        print(f"monitor: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.func is None:  # ctl
        return stack.ctl(config, args.args)
    store = None
    try:
        if getattr(args, "needs_store", True):
            store = open_store(config.db_path)
        args.func(args, config, store)
        return 0
    except UsageError as exc:
        print(f"monitor: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeFailure as exc:
        print(f"monitor: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    finally:
        if store is not None:
            store.close()


if __name__ == "__main__":
    sys.exit(main())

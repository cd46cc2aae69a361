"""Alert delivery: ``monitor sink ...`` (where alerts go) and ``monitor alerts failed|retry``
(the deliveries given up on)."""
from __future__ import annotations

import re
import time

from monitor.cli.common import RuntimeFailure, UsageError, find_watch, print_json, table, ts
from monitor.sinks.channels import KINDS, BadTarget, DeliveryFailed, build, mask
from monitor.store import Duplicate, NotFound

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _options(args) -> dict:
    options: dict = {}
    if args.secret:
        options["secret"] = args.secret
    headers = {}
    for header in args.header or []:
        name, sep, value = header.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z0-9-]+", name.strip()):
            raise UsageError(f"--header {header!r}: write it as 'Name: value'")
        headers[name.strip()] = value.strip()
    if headers:
        options["headers"] = headers
    return options


def cmd_sink_add(args, config, store) -> None:
    name = args.name or f"{args.kind}-{len(store.sink_names()) + 1}"
    if not _NAME.match(name):
        raise UsageError(f"sink name {name!r}: letters, digits, '.', '_' and '-', at most 64")
    if (args.secret or args.header) and args.kind != "webhook":
        raise UsageError("--secret and --header are for webhook sinks")
    options = _options(args)
    try:
        build(args.kind, args.target, options)
    except BadTarget as exc:
        raise UsageError(str(exc)) from None
    watch_id = find_watch(store, args.watch).id if args.watch else None
    try:
        store.add_sink(name, args.kind, args.target, options, watch_id, args.tag, time.time())
    except Duplicate as exc:
        raise UsageError(str(exc)) from None
    scope = f"watch {watch_id}" if watch_id else f"tag {args.tag!r}" if args.tag else "every watch"
    print(f"added sink {name}: {args.kind} {mask(args.target)} for the alerts of {scope} from now on")


def cmd_sink_list(args, config, store) -> None:
    sinks = store.list_sinks()
    if args.json:
        for sink in sinks:
            print_json({"name": sink.name, "kind": sink.kind, "target": mask(sink.target), "watch_id": sink.watch_id,
                        "tag": sink.tag, "delivered": sink.delivered, "pending": sink.pending, "failed": sink.failed,
                        "failing_since": sink.failing_since, "last_error": sink.last_error})
        return
    if not sinks:
        print("no sinks: alerts go to alerts.jsonl and the log only (add one with `monitor sink add KIND TARGET`)")
        return
    print(table(["NAME", "KIND", "TARGET", "FOR", "DELIVERED", "PENDING", "FAILED", "FAILING SINCE", "LAST ERROR"],
                [[s.name, s.kind, mask(s.target), f"watch {s.watch_id}" if s.watch_id else f"tag {s.tag}" if s.tag else "all",
                  str(s.delivered), str(s.pending), str(s.failed), ts(s.failing_since), (s.last_error or "-")[:80]]
                 for s in sinks]))


def cmd_sink_remove(args, config, store) -> None:
    try:
        store.remove_sink(args.name)
    except NotFound as exc:
        raise UsageError(str(exc)) from None
    print(f"removed sink {args.name} (its pending deliveries are dropped)")


def cmd_sink_test(args, config, store) -> None:
    try:
        sink = store.get_sink(args.name)
    except NotFound as exc:
        raise UsageError(str(exc)) from None
    now = time.time()
    alert = {"alert_id": f"test-{int(now)}", "watch_id": 0, "baseUrl": "https://example.org/", "watch_name": "test",
             "tag": None, "url": "https://example.org/monitor-test", "text": "Test alert from homepage-monitor",
             "first_seen": now}
    try:
        build(sink.kind, sink.target, sink.options).send([alert])
    except (BadTarget, DeliveryFailed) as exc:
        raise RuntimeFailure(f"sink {sink.name}: the test alert failed: {exc}") from None
    print(f"sink {sink.name}: the test alert was delivered ({sink.kind} {mask(sink.target)})")


def cmd_sink_kinds(args, config, store) -> None:
    for name, channel in sorted(KINDS.items()):
        print(channel.__doc__.strip().replace("\n    ", "\n  ") + "\n")


def cmd_alerts_failed(args, config, store) -> None:
    failed = store.failed_deliveries(args.sink)
    if args.json:
        for delivery in failed:
            print_json(delivery)
        return
    if not failed:
        print("no failed deliveries")
        return
    print(table(["SINK", "ALERT", "ATTEMPTS", "GAVE UP", "LAST ERROR", "LINK"],
                [[d["sink"], d["alert_id"], str(d["attempts"]), ts(d["failed_at"]), (d["last_error"] or "-")[:60], d["url"]]
                 for d in failed]))
    print("send them again with `monitor alerts retry --all` (or --sink NAME, or ALERT_ID...)")


def cmd_alerts_retry(args, config, store) -> None:
    if args.all == bool(args.alert_ids):
        raise UsageError("give ALERT_ID... or --all")
    if args.sink:
        try:
            store.get_sink(args.sink)
        except NotFound as exc:
            raise UsageError(str(exc)) from None
    count = store.retry_failed(time.time(), args.sink, None if args.all else args.alert_ids)
    print(f"{count} delivery(ies) pending again: the notifier sends them within a second")

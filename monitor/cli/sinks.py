"""Alert delivery: ``monitor sink ...`` (where alerts go) and ``monitor alerts failed|retry``
(the deliveries given up on). The sink and filter commands first apply the sinks and
filters the TOML file declares (:mod:`monitor.sinks.declared`), so they act on what the
file says now."""
from __future__ import annotations

import sys
import time

from monitor import config as configuration
from monitor.cli.common import RuntimeFailure, UsageError, find_watch, print_json, table, ts
from monitor.durations import format_duration, parse_duration
from monitor.sinks import declared
from monitor.sinks.channels import KINDS, NAME, BadTarget, DeliveryFailed, build, mask
from monitor.store import Declared, Duplicate, NotFound, SinkRecord


def apply_declarations(config, store) -> None:
    """Sync the TOML file's sinks and filters into the store; warn of those left out. Run
    where there is no TOML file, the command leaves the declared ones alone: they are the
    notifier's file's to change, not to be dropped for a command run from another directory."""
    if not configuration.config_file().exists():
        return
    for problem in declared.sync(store, config, time.time()).problems:
        print(f"monitor: warning: {configuration.config_file()}: {problem}", file=sys.stderr)


def declared_here(what: str) -> UsageError:
    """The error of a command that would change a sink or filter the TOML file declares."""
    return UsageError(f"{what} is declared in {configuration.config_file()}: remove it there")


def _options(args) -> dict:
    options: dict = {}
    if args.secret:
        options["secret"] = args.secret
    headers = {}
    for header in args.header or []:
        name, sep, value = header.partition(":")
        if not sep:
            raise UsageError(f"--header {header!r}: write it as 'Name: value'")
        headers[name.strip()] = value.strip()
    if headers:
        options["headers"] = headers
    if args.digest:
        try:
            options["digest"] = parse_duration(args.digest)
        except ValueError as exc:
            raise UsageError(f"--digest: {exc}") from None
    return options


def cmd_sink_add(args, config, store) -> None:
    apply_declarations(config, store)
    name = args.name or f"{args.kind}-{len(store.sink_names()) + 1}"
    if not NAME.match(name):
        raise UsageError(f"sink name {name!r}: letters, digits, '.', '_' and '-', at most 64")
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
    digest = f", a digest mail every {format_duration(options['digest'])} at most" if args.digest else ""
    print(f"added sink {name}: {args.kind} {mask(args.target)} for the alerts of {scope} from now on{digest}")


def _kind(sink) -> str:
    """A sink's kind, and its digest period when it gathers alerts (they show as pending meanwhile)."""
    digest = sink.options.get("digest")
    return f"{sink.kind}, digest {format_duration(digest)}" if digest else sink.kind


def sink_dict(sink: SinkRecord) -> dict:
    """A sink as ``sink list --json`` and the web API show it (its target's secrets masked)."""
    return {"name": sink.name, "kind": sink.kind, "target": mask(sink.target), "watch_id": sink.watch_id,
            "tag": sink.tag, "digest": sink.options.get("digest"), "declared": sink.declared,
            "delivered": sink.delivered, "pending": sink.pending, "failed": sink.failed,
            "failing_since": sink.failing_since, "last_error": sink.last_error}


def cmd_sink_list(args, config, store) -> None:
    apply_declarations(config, store)
    sinks = store.list_sinks()
    if args.json:
        for sink in sinks:
            print_json(sink_dict(sink))
        return
    if not sinks:
        print("no sinks: alerts go to alerts.jsonl and the log only (add one with `monitor sink add KIND TARGET`)")
        return
    print(table(["NAME", "KIND", "TARGET", "FOR", "FROM", "DELIVERED", "PENDING", "FAILED", "FAILING SINCE",
                 "LAST ERROR"],
                [[s.name, _kind(s), mask(s.target), f"watch {s.watch_id}" if s.watch_id else f"tag {s.tag}" if s.tag else "all",
                  configuration.config_file().name if s.declared else "cli", str(s.delivered), str(s.pending),
                  str(s.failed), ts(s.failing_since), (s.last_error or "-")[:80]]
                 for s in sinks]))


def cmd_sink_remove(args, config, store) -> None:
    apply_declarations(config, store)
    try:
        store.remove_sink(args.name)
    except NotFound as exc:
        raise UsageError(str(exc)) from None
    except Declared:
        raise declared_here(f"sink {args.name}") from None
    print(f"removed sink {args.name} (its pending deliveries are dropped)")


def cmd_sink_test(args, config, store) -> None:
    apply_declarations(config, store)
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

"""Alert delivery: ``monitor sink ...`` (where alerts go) and ``monitor alerts failed|retry``
(the deliveries given up on). The sink and filter commands first apply the sinks and
filters the TOML file declares (:mod:`monitor.sinks.declared`), so they act on what the
file says now; then the functions that do the work (shared with the web API, which leaves
the declarations to the notifier, see :mod:`monitor.cli.filters`) are called, and the
``cmd_*`` handlers print what they did."""
from __future__ import annotations

import sys
import time

from monitor import config as configuration
from monitor.cli.common import RuntimeFailure, UsageError, checked_label, find_watch, print_json, scope, table, ts
from monitor.durations import format_duration, parse_duration
from monitor.sinks import declared
from monitor.sinks.channels import KINDS, NAME, BadTarget, DeliveryFailed, build, mask
from monitor.store import Declared, Duplicate, NotFound, SinkRecord, Store


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


def header_lines(lines: list[str]) -> dict[str, str]:
    """``--header 'Name: value'`` options as a dict (UsageError for one without a colon)."""
    headers = {}
    for header in lines:
        name, sep, value = header.partition(":")
        if not sep:
            raise UsageError(f"--header {header!r}: write it as 'Name: value'")
        headers[name.strip()] = value.strip()
    return headers


def sink_options(secret: str | None, headers: dict[str, str] | None, digest: str | None) -> dict:
    """A sink's options as the store keeps them; the channel itself checks that they fit
    its kind (:func:`add_sink`)."""
    options: dict = {}
    if secret:
        options["secret"] = secret
    if headers:
        options["headers"] = headers
    if digest:
        try:
            options["digest"] = parse_duration(digest)
        except ValueError as exc:
            raise UsageError(f"--digest: {exc}") from None
    return options


def add_sink(store: Store, kind: str, target: str, name: str | None, options: dict,
             watch: str | None = None, tag: str | None = None) -> SinkRecord:
    """Check a sink as ``sink add`` takes it (UsageError, and nothing added, otherwise) and
    add it for the alerts of one watch (id or URL), one tag, or every watch; named
    KIND-N when ``name`` is None."""
    if watch is not None and tag is not None:
        raise UsageError("give a watch or a tag, not both")  # (argparse says so for the CLI)
    tag = checked_label("tag", tag) or None
    name = name or f"{kind}-{len(store.sink_names()) + 1}"
    if not NAME.match(name):
        raise UsageError(f"sink name {name!r}: letters, digits, '.', '_' and '-', at most 64")
    try:
        build(kind, target, options)
    except BadTarget as exc:
        raise UsageError(str(exc)) from None
    watch_id = find_watch(store, watch).id if watch else None
    try:
        store.add_sink(name, kind, target, options, watch_id, tag, time.time())
    except Duplicate as exc:
        raise UsageError(str(exc)) from None
    return store.get_sink(name)


def cmd_sink_add(args, config, store) -> None:
    apply_declarations(config, store)
    options = sink_options(args.secret, header_lines(args.header or []), args.digest)
    sink = add_sink(store, args.kind, args.target, args.name, options, args.watch, args.tag)
    digest = f", a digest mail every {format_duration(options['digest'])} at most" if "digest" in options else ""
    print(f"added sink {sink.name}: {sink.kind} {mask(sink.target)} for the alerts of "
          f"{scope(sink.watch_id, sink.tag)} from now on{digest}")


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


def remove_sink(store: Store, name: str) -> None:
    """Stop delivering to a sink (NotFound when there is none of that name; UsageError when
    the TOML file declares it)."""
    try:
        store.remove_sink(name)
    except Declared:
        raise declared_here(f"sink {name}") from None


def cmd_sink_remove(args, config, store) -> None:
    apply_declarations(config, store)
    remove_sink(store, args.name)
    print(f"removed sink {args.name} (its pending deliveries are dropped)")


def send_test_alert(store: Store, name: str) -> SinkRecord:
    """Send one test alert to a sink now: the sink when it was delivered, RuntimeFailure
    saying why not otherwise (NotFound when there is no such sink)."""
    sink = store.get_sink(name)
    now = time.time()
    alert = {"alert_id": f"test-{int(now)}", "watch_id": 0, "baseUrl": "https://example.org/", "watch_name": "test",
             "tag": None, "url": "https://example.org/monitor-test", "text": "Test alert from homepage-monitor",
             "first_seen": now}
    try:
        build(sink.kind, sink.target, sink.options).send([alert])
    except (BadTarget, DeliveryFailed) as exc:
        raise RuntimeFailure(f"sink {sink.name}: the test alert failed: {exc}") from None
    return sink


def cmd_sink_test(args, config, store) -> None:
    apply_declarations(config, store)
    sink = send_test_alert(store, args.name)
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


def retry_deliveries(store: Store, alert_ids: list[str] | None, sink: str | None = None) -> int:
    """Make failed deliveries pending again: those of ``alert_ids``, or all of them for None
    (of ``sink`` when given); how many. UsageError for an unknown sink."""
    if sink:
        try:
            store.get_sink(sink)
        except NotFound as exc:
            raise UsageError(str(exc)) from None
    return store.retry_failed(time.time(), sink, alert_ids)


def cmd_alerts_retry(args, config, store) -> None:
    if args.all == bool(args.alert_ids):
        raise UsageError("give ALERT_ID... or --all")
    count = retry_deliveries(store, None if args.all else args.alert_ids, args.sink)
    print(f"{count} delivery(ies) pending again: the notifier sends them within a second")

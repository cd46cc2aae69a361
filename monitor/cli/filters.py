"""``monitor filter ...``: rules that hold back alerts (see :mod:`monitor.filters`)."""
from __future__ import annotations

import time

from monitor import config as configuration
from monitor.cli.common import UsageError, find_watch, print_json, table
from monitor.cli.sinks import apply_declarations, declared_here
from monitor.sinks.declared import check_rule
from monitor.store import Declared, NotFound, parse_id


def cmd_filter_add(args, config, store) -> None:
    apply_declarations(config, store)
    pattern = args.pattern or ""
    try:
        check_rule(args.rule, pattern)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    watch_id = find_watch(store, args.watch).id if args.watch else None
    filter_id = store.add_filter(args.rule, pattern, watch_id, args.tag, time.time())
    scope = f"watch {watch_id}" if watch_id else f"tag {args.tag!r}" if args.tag else "every watch"
    shown = f"{args.rule} {pattern!r}" if pattern else args.rule
    print(f"added filter {filter_id}: {shown} for {scope}; new links it holds back are recorded, not alerted")


def cmd_filter_list(args, config, store) -> None:
    apply_declarations(config, store)
    rules, declared = store.list_filters(), store.declared_filter_ids()
    if args.json:
        for rule in rules:
            print_json({"id": rule.id, "rule": rule.rule, "pattern": rule.pattern, "watch_id": rule.watch_id,
                        "tag": rule.tag, "declared": rule.id in declared})
        return
    if not rules:
        print("no filters: every new link is alerted")
        return
    print(table(["ID", "RULE", "PATTERN", "FOR", "FROM"],
                [[str(r.id), r.rule, r.pattern or "-", f"watch {r.watch_id}" if r.watch_id else f"tag {r.tag}" if r.tag
                  else "all", configuration.config_file().name if r.id in declared else "cli"] for r in rules]))


def cmd_filter_remove(args, config, store) -> None:
    filter_id = parse_id(args.id)
    if filter_id is None:
        raise UsageError(f"{args.id[:40]!r} is not a filter id (`monitor filter list` shows them)")
    apply_declarations(config, store)
    try:
        store.remove_filter(filter_id)
    except NotFound as exc:
        raise UsageError(str(exc)) from None
    except Declared:
        raise declared_here(f"filter {filter_id}") from None
    print(f"removed filter {filter_id}")

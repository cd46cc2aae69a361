"""``monitor filter ...``: rules that hold back alerts (see :mod:`monitor.filters`).

The commands apply the TOML file's declarations, then :func:`add_filter` or
:func:`remove_filter` do the work (shared with the web API and the watch page, which leave
the declarations to the notifier: their configuration is the one read when the web front
started, and syncing it would undo the file's later changes)."""
from __future__ import annotations

import time

from monitor import config as configuration
from monitor.cli.common import UsageError, checked_label, find_watch, print_json, scope, table
from monitor.cli.sinks import apply_declarations, declared_here
from monitor.filters import Rule
from monitor.sinks.declared import check_rule
from monitor.store import Declared, Store, parse_id


def filter_dict(rule: Rule, declared: set[int]) -> dict:
    """A rule as ``filter list --json`` and the web API show it."""
    return {"id": rule.id, "rule": rule.rule, "pattern": rule.pattern, "watch_id": rule.watch_id, "tag": rule.tag,
            "declared": rule.id in declared}


def add_filter(store: Store, rule: str, pattern: str | None, watch: str | None = None,
               tag: str | None = None) -> Rule:
    """Check a rule as ``filter add`` takes it (UsageError, and nothing added, otherwise) and
    add it for one watch (id or URL), one tag, or every watch."""
    if watch is not None and tag is not None:
        raise UsageError("give a watch or a tag, not both")  # (argparse says so for the CLI)
    pattern = pattern or ""
    tag = checked_label("tag", tag) or None
    try:
        check_rule(rule, pattern)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    watch_id = find_watch(store, watch).id if watch else None
    return Rule(store.add_filter(rule, pattern, watch_id, tag, time.time()), rule, pattern, watch_id, tag)


def cmd_filter_add(args, config, store) -> None:
    apply_declarations(config, store)
    rule = add_filter(store, args.rule, args.pattern, args.watch, args.tag)
    shown = f"{rule.rule} {rule.pattern!r}" if rule.pattern else rule.rule
    print(f"added filter {rule.id}: {shown} for {scope(rule.watch_id, rule.tag)}; "
          "new links it holds back are recorded, not alerted")


def cmd_filter_list(args, config, store) -> None:
    apply_declarations(config, store)
    rules, declared = store.list_filters(), store.declared_filter_ids()
    if args.json:
        for rule in rules:
            print_json(filter_dict(rule, declared))
        return
    if not rules:
        print("no filters: every new link is alerted")
        return
    print(table(["ID", "RULE", "PATTERN", "FOR", "FROM"],
                [[str(r.id), r.rule, r.pattern or "-", f"watch {r.watch_id}" if r.watch_id else f"tag {r.tag}" if r.tag
                  else "all", configuration.config_file().name if r.id in declared else "cli"] for r in rules]))


def remove_filter(store: Store, filter_id: int) -> None:
    """Remove a rule: NotFound when there is none with that id, UsageError when the TOML
    file declares it."""
    try:
        store.remove_filter(filter_id)
    except Declared:
        raise declared_here(f"filter {filter_id}") from None


def cmd_filter_remove(args, config, store) -> None:
    filter_id = parse_id(args.id)
    if filter_id is None:
        raise UsageError(f"{args.id[:40]!r} is not a filter id (`monitor filter list` shows them)")
    apply_declarations(config, store)
    remove_filter(store, filter_id)
    print(f"removed filter {filter_id}")

"""Sinks and filters declared in the TOML file, and how they reach the store.

```toml
[sinks.team-chat]            # the sink's name
kind = "webhook"             # webhook, email or apprise; TARGET as `monitor sink kinds` says
target = "https://hooks.example/monitor"
tag = "news"                 # or watch = 3 (an id) or watch = "https://news.example/"; neither: every watch
secret = "s3cret"            # webhook: --secret; headers = { X-Team = "news" }: --header
[sinks.desk]
kind = "email"
target = "smtp://mail.example:587?to=desk@example.org&starttls=1"
digest = "15m"               # email: --digest

[[filters]]
rule = "exclude"             # as `monitor filter add RULE [PATTERN]`
pattern = "sponsored"
tag = "news"                 # or watch = ...; neither: every watch
```

:func:`parse` checks them when the configuration loads (a bad one is a one-line
:class:`ConfigError`, like any other setting). :func:`sync` makes the store's ``sinks`` and
``filters`` tables hold exactly what the file declares, marked declared: the notifier syncs
at start and whenever the file changes, and ``monitor sink|filter ...`` before they act.
Rows stay the one place every process reads sinks and filters from; a sink whose target
changes in the file is updated in place, so its delivery history stays; one the file no
longer names goes, as with ``monitor sink remove``; the CLI refuses to remove a declared one.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from monitor.config import Config, ConfigError, load
from monitor.durations import parse_duration
from monitor.filters import NEEDS_PATTERN, RULES, compile_pattern
from monitor.log import EventLogger
from monitor.sinks.channels import NAME, BadTarget, build
from monitor.store import NotFound, Store
from monitor.urls import BadURL, validate_watch_url

SINK_KEYS = {"kind", "target", "watch", "tag", "secret", "headers", "digest"}
FILTER_KEYS = {"rule", "pattern", "watch", "tag"}


@dataclass(frozen=True)
class DeclaredSink:
    name: str
    kind: str
    target: str
    options: dict
    watch: int | str | None  # an id or a URL, resolved when synced (the watch may come later)
    tag: str | None


@dataclass(frozen=True)
class DeclaredFilter:
    rule: str
    pattern: str
    watch: int | str | None
    tag: str | None


class Synced(NamedTuple):
    changes: list[str]  # what the sync changed, a line each
    problems: list[str]  # declarations left out for now: their watch is not on the watch list


def check_rule(rule: str, pattern: str) -> None:
    """Raise ValueError with a one-line reason unless ``rule`` with ``pattern`` is a valid
    filter (the rules and patterns of :mod:`monitor.filters`)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}: one of {', '.join(RULES)}")
    if rule in NEEDS_PATTERN:
        try:
            compile_pattern(pattern)
        except ValueError as exc:
            raise ValueError(f"{rule}: {exc}") from None
    elif pattern:
        raise ValueError(f"{rule} takes no pattern")


def parse(sinks: object, filters: object) -> tuple[tuple[DeclaredSink, ...], tuple[DeclaredFilter, ...]]:
    """The ``sinks`` table and ``filters`` array of tables of the TOML file, checked;
    ConfigError naming the entry and the reason otherwise."""
    if not isinstance(sinks, dict):
        raise ConfigError("sinks: write each sink as a table, [sinks.NAME]")
    if not isinstance(filters, list) or not all(isinstance(entry, dict) for entry in filters):
        raise ConfigError("filters: write each filter as a table, [[filters]]")
    return (tuple(_sink(name, entry) for name, entry in sinks.items()),
            tuple(_filter(f"filters #{number}", entry) for number, entry in enumerate(filters, 1)))


def _sink(name: str, entry: object) -> DeclaredSink:
    where = f"sinks.{name}"
    if not NAME.match(name):
        raise ConfigError(f"{where}: a sink name is letters, digits, '.', '_' and '-', at most 64")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: write it as a table, [sinks.{name}]")
    _known_keys(where, entry, SINK_KEYS)
    kind, target = _text(where, entry, "kind", required=True), _text(where, entry, "target", required=True)
    options: dict = {}
    if "secret" in entry:
        options["secret"] = _text(where, entry, "secret")
    if "headers" in entry:
        headers = entry["headers"]
        if not isinstance(headers, dict) or not all(isinstance(value, str) for value in headers.values()):
            raise ConfigError(f"{where}: headers is a table of names and text values: headers = {{ X-Team = \"news\" }}")
        options["headers"] = headers
    if "digest" in entry:
        try:
            options["digest"] = parse_duration(_text(where, entry, "digest"))
        except ValueError as exc:
            raise ConfigError(f"{where}: digest: {exc}") from None
    try:
        build(kind, target, options)
    except BadTarget as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return DeclaredSink(name, kind, target, options, *_scope(where, entry))


def _filter(where: str, entry: dict) -> DeclaredFilter:
    _known_keys(where, entry, FILTER_KEYS)
    rule, pattern = _text(where, entry, "rule", required=True), _text(where, entry, "pattern") or ""
    try:
        check_rule(rule, pattern)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return DeclaredFilter(rule, pattern, *_scope(where, entry))


def _known_keys(where: str, entry: dict, known: set[str]) -> None:
    for key in entry:
        if key not in known:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")


def _text(where: str, entry: dict, key: str, required: bool = False) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key} = \"...\" is {'required' if value is None else 'a non-empty text'}")
    return value


def _scope(where: str, entry: dict) -> tuple[int | str | None, str | None]:
    """The entry's watch (an id, or a URL as ``monitor watch add`` stores it) and tag."""
    watch, tag = entry.get("watch"), _text(where, entry, "tag")
    if watch is not None and tag is not None:
        raise ConfigError(f"{where}: give watch or tag, not both")
    if isinstance(watch, str):
        try:
            watch = validate_watch_url(watch)
        except BadURL as exc:
            raise ConfigError(f"{where}: watch: {exc}") from None
    elif watch is not None and (type(watch) is not int or watch < 1):
        raise ConfigError(f"{where}: watch is a watch id (a whole number) or its URL")
    return watch, tag


def _watch_id(store: Store, watch: int | str | None) -> int | None:
    """The id of a declared watch reference; NotFound when it is not on the watch list."""
    if watch is None:
        return None
    return store.get_watch(watch).id if isinstance(watch, int) else store.find_watch(watch).id


def sync(store: Store, config: Config, now: float) -> Synced:
    """Make the store's declared sinks and filters those of ``config`` (see the module's
    docstring). One whose watch is not on the watch list is left out until it is."""
    problems: list[str] = []
    sinks: dict[str, tuple] = {}
    for sink in config.sinks:
        try:
            sinks[sink.name] = (sink.kind, sink.target, sink.options, _watch_id(store, sink.watch), sink.tag)
        except NotFound as exc:
            problems.append(f"sink {sink.name} left out: {exc}")
    rules: list[tuple] = []
    for rule in config.filters:
        try:
            rules.append((rule.rule, rule.pattern, _watch_id(store, rule.watch), rule.tag))
        except NotFound as exc:
            problems.append(f"filter {' '.join(filter(None, (rule.rule, rule.pattern)))} left out: {exc}")
    return Synced(store.sync_declared_sinks(sinks, now) + store.sync_declared_filters(rules, now), problems)


class Declarations:
    """Keeps a long-running process's store in step with the TOML file: synced at the first
    :meth:`refresh` (when there is a file), and again at the first one after the file
    changed (or appeared, or went)."""

    def __init__(self, path: Path, store: Store, log: EventLogger) -> None:
        self.path, self.store, self.log = path, store, log
        self.seen: tuple | None = ()  # the file's (mtime, size) at the last sync, None: no file; (): not yet

    def refresh(self, now: float) -> None:
        """Sync if the file changed. A file that does not load is logged and left alone:
        the declarations stay as they were until it is fixed."""
        try:
            stat = self.path.stat()
            seen = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            seen = None
        if seen == self.seen:
            return
        started_without = seen is None and self.seen == ()
        self.seen = seen
        if started_without:
            # No file where this process runs: the declared rows are left alone (a file that
            # goes away while it runs is one taken back, and its declarations go with it).
            return
        try:
            config = load()
        except ConfigError as exc:
            self.log.error("configuration file not applied", reason=str(exc))
            return
        changes, problems = sync(self.store, config, now)
        for change in changes:
            self.log.info("configuration applied", change=change)
        for problem in problems:
            self.log.warning("configuration not applied in full", problem=problem)

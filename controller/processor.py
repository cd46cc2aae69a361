"""The processor: consume ``task_queue``, find the links never seen for each watch, record
them and raise alerts.

Tasks are taken in groups (up to ``processor_batch`` tasks or ``GROUP_LINKS`` links, or
whatever arrived within ``GROUP_WAIT`` seconds), and per group, exactly once in effect:

1. normalise each link URL and look its 6-character code up in LevelDB (and in the
   group's own pending entries, so a task delivered twice in one group alerts nothing twice);
2. write the new index entries, the baseline markers and ONE outbox record of the group's
   effects in one synced LevelDB batch;
3. apply the outbox record: SQLite (links, alerts, watch statuses and validators, check
   counts) in one transaction, then every alert sink; then delete the record;
4. ack the whole group with one ``multiple`` ack.

A crash anywhere leaves either unacked tasks (redelivered; their links are now known, so
nothing doubles) or an outbox record (applied again at start; SQLite inserts are
idempotent and sinks skip alert ids they already have). A group that fails is retried
task by task, so one task that can never succeed does not hold its group-mates back (it
goes to ``dead_letter``; a task is held, not requeued, while the stores are unavailable), and
an outbox record that fails ``QUARANTINE_AFTER`` times is moved to ``dead_letter`` (origin
``outbox``), so it never blocks the records behind it.
The first successful check of a watch is its baseline: links recorded, no alerts. A
``not_modified`` task (304, or the same body as last time) touches no link. A new link the
watch's filter rules hold back (:mod:`monitor.filters`) is recorded without an alert. When
most of a page's links are new at once (:class:`LayoutRule`), they are adopted silently and
one "layout changed" alert, about the page itself, says so. A watch's CSS selector travels
with its job and back with the task: a result found under a selector the watch no longer
has is dropped, and the first check under a changed selector is adopted like a baseline.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field, replace

import plyvel

from monitor import amqp, filters
from monitor import config as configuration
from monitor.homekey import HomeKey
from monitor.linkindex import LinkIndex, Mark, NewLink, Reappearance
from monitor.durations import format_duration
from monitor.log import describe, get_logger
from monitor.messages import Alert, InvalidMessage, Task
from monitor.sinks import Sink, build_sinks
from monitor.store import FAILING, CheckResult, LinkRecord, Store, Validators, WatchState, open_store
from monitor.urls import BadURL, comparable, normalize, redact, renewing_params

GROUP_WAIT = 0.05  # seconds a group waits for more tasks once the queue goes quiet
# Errors of the stores or the disk, not of the task in hand: wait for them to pass.
INFRASTRUCTURE = (sqlite3.OperationalError, OSError, plyvel.Error)
FORGET_EVERY = 60.0  # seconds between looks for removed watches whose index entries can go
QUARANTINE_AFTER = 3  # failed attempts before an outbox record is moved aside
QUARANTINE = "outbox"  # the origin `monitor dlq list` shows for a quarantined outbox record
GROUP_LINKS = 20_000  # a group closes at this many links too: its memory is bounded, whatever the pages
SHRUNK = 0.25  # a check with fewer than this share of the page's links is doubted
DOUBTS = 3  # doubted checks in a row after which a page with links is taken as it is
# A parameter that renews this many links on one check is ignored at once; one that renews
# fewer, only when it did on the check before too (a few featured stories can change at once).
SURELY_VOLATILE = 5


def _status(task: Task) -> str:
    """The one line ``watch list`` shows: ``ok``, ``ok (<warning>)``, ``error: <reason>`` or
    ``skipped: <reason>``."""
    if task.status in ("ok", "not_modified"):
        return f"ok ({task.error})" if task.error else "ok"
    return f"{task.status}: {task.error or 'no reason given'}"


def _outcome(task: Task) -> str:
    return f"not_modified_{task.not_modified_by}" if task.status == "not_modified" else task.status


@dataclass(frozen=True)
class LayoutRule:
    """When a check finds at least ``min_links`` new links and more than ``fraction`` of the
    page's links new, the page changed (a redesign, a move to https), not its news. A
    first check with fewer than ``baseline_min_links`` is not the baseline (see
    :meth:`Processor._doubt`)."""
    fraction: float = 0.5
    min_links: int = 20
    baseline_min_links: int = 5


@dataclass
class _Group:
    """What a group's tasks leave to write in its one LevelDB batch, as they go."""
    pending: dict[bytes, list] = field(default_factory=dict)  # index entries read, or to write
    entries: dict[bytes, list] = field(default_factory=dict)  # those to write
    marks: dict[int, Mark] = field(default_factory=dict)  # each watch's mark as the group leaves it
    checked: set[int] = field(default_factory=set)  # watches with a trusted check: their baseline marker
    changed: set[int] = field(default_factory=set)  # watches whose other marks changed

    def mark(self, watch_id: int, index: LinkIndex) -> Mark:
        if watch_id not in self.marks:
            self.marks[watch_id] = index.mark(watch_id)
        return self.marks[watch_id]

    def set_mark(self, watch_id: int, mark: Mark) -> None:
        if mark.state() != self.marks[watch_id].state():
            self.changed.add(watch_id)
        self.marks[watch_id] = mark

    def adopt(self, written: dict[bytes, list]) -> None:
        """Keep index entries :meth:`LinkIndex.new_links` or :meth:`LinkIndex.rekey` returned."""
        self.pending.update(written)
        self.entries.update(written)


@dataclass(frozen=True)
class HealthRule:
    """A watch whose checks fail, or are skipped because its host is disabled, for
    ``broken_after`` seconds is broken: one alert says so, and one when a check sees the
    page again. (A host's first cooldowns are minutes long and end by themselves: alerting
    each would be noise, so a disabled host counts as failing time like an error.)"""
    broken_after: float = 6 * 3600.0

    def judge(self, task: Task, watch: WatchState, status: str, checked_at: float) -> tuple[str | None, tuple | None]:
        """``("broken" | "recovered" | None, the notice (alert id, text) that says so)``."""
        if _outcome(task) in FAILING:
            since = watch.failing_since or checked_at
            if watch.broken_alerted or checked_at - since < self.broken_after:
                return None, None
            return "broken", (f"{task.id}-broken-{int(since)}",
                              f"watch failing for {format_duration(checked_at - since)}: {status}")
        if not watch.broken_alerted or watch.failing_since is None:
            return None, None
        return "recovered", (f"{task.id}-recovered-{int(watch.failing_since)}",
                             f"watch recovered after failing for {format_duration(checked_at - watch.failing_since)}")


class Processor:
    def __init__(self, store: Store, index: LinkIndex, sinks: list[Sink], stop: threading.Event | None = None,
                 layout: "LayoutRule | None" = None, reappearance: Reappearance = Reappearance(),
                 health: HealthRule = HealthRule()) -> None:
        # An outbox record is deleted (synced) right after its SQLite commit: that commit
        # must be on disk by then, or a power cut loses links and alerts for good.
        store.make_durable()
        self.store = store
        self.index = index
        self.sinks = sinks
        self.stop = stop or threading.Event()  # set on SIGTERM: stop holding a task
        self.log = get_logger("processor")
        self.outbox_dirty = True  # drain before the first group: a crash may have left records
        self.attempts: dict[bytes, int] = {}  # failed attempts per outbox record
        self.layout = layout or LayoutRule()
        self.reappearance = reappearance
        self.health = health
        self.rules: list[filters.Rule] = []  # the filters' rules, read again when they change
        self.rules_signature: tuple | None = None
        self.site_pages = filters.SitePages(store)  # what the noise rule's site furniture is judged by

    def handle(self, task: Task) -> int:
        """Make one task's effects durable; return the number of alerts raised."""
        return self.handle_group([task])

    def handle_group(self, tasks: list[Task]) -> int:
        """Make a group of tasks' effects durable together; return the number of alerts raised."""
        watches = self.store.watch_states({task.id for task in tasks})  # those still on the list
        group = _Group()
        checks = []
        checked_at = time.time()
        for task in tasks:
            if task.id not in watches:
                self.log.info("task for a removed watch dropped", watch_id=task.id, url=redact(task.base_url))
                continue
            watch = watches[task.id]  # its URL from the store: a task's baseUrl is not trusted
            if None not in (task.fetched_at, watch.last_fetched_at) and task.fetched_at < watch.last_fetched_at:
                # A timed-out job's late result, or a replayed dead letter: the watch has a newer one.
                self.log.info("stale result dropped", watch_id=task.id, fetched_at=task.fetched_at,
                              newer=watch.last_fetched_at)
                continue
            if task.status in ("ok", "not_modified") and (task.selector or "") != watch.selector:
                # Extracted under a selector the watch no longer has (its job was issued before
                # `watch set --selector`): its links and validators describe another region.
                self.log.info("result for a former selector dropped", watch_id=task.id)
                continue
            new_region = watch.selector != watch.links_selector  # the first check under a changed selector
            links, notices, status, volatile = [], [], _status(task), frozenset()
            if task.status == "ok":
                links, notices, status, volatile = self._links(task, watch, checked_at, status, group, new_region)
            health, notice = self.health.judge(task, watch, status, checked_at)
            notices += [notice] if notice else []
            adopted = new_region and task.status == "ok" and bool(task.context)
            watches[task.id] = watch._replace(
                last_fetched_at=watch.last_fetched_at if task.fetched_at is None else task.fetched_at,
                failing_since=(watch.failing_since or checked_at) if _outcome(task) in FAILING else None,
                broken_alerted=health == "broken" or (_outcome(task) in FAILING and watch.broken_alerted),
                volatile_params=" ".join(sorted(set(watch.volatile_params.split()) | volatile)),
                links_selector=watch.selector if adopted else watch.links_selector)
            validators = None if task.status in FAILING else [task.etag, task.last_modified, task.content_hash]
            checks.append({
                "watch_id": task.id, "base_url": watch.url, "checked_at": checked_at, "fetched_at": task.fetched_at,
                "status": status, "outcome": _outcome(task), "validators": validators,
                "http_status": task.http_status, "elapsed_ms": task.elapsed_ms, "parse_ms": task.parse_ms,
                "links": links,
                "notices": notices, "health": health, "volatile": sorted(volatile),
                "found": len(task.context) if task.status == "ok" else None,
                "adopted_selector": watch.selector if adopted else None,
            })
        if not checks:
            return 0
        key = self.index.commit(group.entries, {"checks": checks},
                                checked={watch_id: group.marks[watch_id] for watch_id in group.checked},
                                states={watch_id: group.marks[watch_id] for watch_id in group.changed})
        return self.apply(key, {"checks": checks}, recovering=False)

    def _links(self, task: Task, watch: WatchState, checked_at: float, status: str, group: "_Group",
               new_region: bool) -> tuple[list[dict], list, str, frozenset[str]]:
        """An ``ok`` task's new links (with their alert ids, None for those not alerted), the
        notices about the page, its status line and the query parameters found to change on
        every check. ``new_region``: the watch's selector changed since its links were found,
        and this check's links are adopted like a baseline's."""
        before = group.mark(task.id, self.index)
        mark = replace(before, links=None) if new_region else before  # the former count says nothing of a new region
        doubt = self._doubt(mark, len(task.context))
        if doubt:
            status = f"ok ({doubt})"
            if task.context:  # only checks with links count towards taking the page as it is
                mark = replace(mark, doubts=mark.doubts + 1)
        else:
            mark = replace(mark, doubts=0)
            if task.context:
                mark = replace(mark, baselined=True, checked_at=checked_at, links=len(task.context))
                group.checked.add(task.id)
        # The baseline's links and a doubted check's are recorded without alerts.
        silent = not before.baselined or doubt is not None or new_region
        ignore = watch.ignored
        if ignore - mark.ignored:  # a parameter ignored since the last check: known links in that form too
            group.adopt(self.index.rekey(task.id, ignore, group.pending))
        links = self._normalised_links(task, ignore, mark.ignored)
        new, written = self.index.new_links(task.id, links, group.pending, self.reappearance, before.checked_at)
        renewed = self._renewing(task.id, new, links, mark) if not silent and len(new) >= 2 else {}
        volatile = frozenset(name for name, hits in renewed.items() if hits >= SURELY_VOLATILE or name in mark.suspects)
        if volatile:
            # A parameter appended per request renewed the links: compare without it from now
            # on (the links just found in their renewed form are not kept).
            self.log.warning("query parameters that change on every check: ignored from now on",
                             watch_id=task.id, params=" ".join(sorted(volatile)))
            ignore |= volatile
            group.adopt(self.index.rekey(task.id, ignore, group.pending))
            links = self._normalised_links(task, ignore, mark.ignored)
            new, written = self.index.new_links(task.id, links, group.pending, self.reappearance, before.checked_at)
        group.adopt(written)
        group.set_mark(task.id, replace(mark, ignored=ignore, suspects=frozenset(renewed) - volatile))
        notices = []
        held_back = set()
        if not silent and self._layout_changed(len(new), len(task.context)):
            # A redesign or a move to https renews most links at once: one alert says so,
            # and the new links are adopted silently.
            held_back = {link.url for link in new}
            notices.append((f"{task.id}-layout-{int(checked_at)}",
                            f"layout changed: {len(new)} of {len(task.context)} links are new at once "
                            "(adopted without an alert each)"))
            self.log.warning("layout changed", watch_id=task.id, new=len(new), links=len(task.context))
        elif new and not silent:
            held_back = self._held_back(task.id, watch.tag, watch.url, new)
        links = [{"url": link.url, "text": link.text, "code": link.code,
                  "alert_id": None if silent or link.url in held_back else link.alert_id} for link in new]
        return links, notices, status, volatile

    def _renewing(self, watch_id: int, new: list[NewLink], links: list[tuple], mark: Mark) -> dict[str, int]:
        """The query parameters whose value alone renewed links on this check (see
        :func:`monitor.urls.renewing_params`), with how many."""
        return renewing_params([link.url for link in new], [url for url, _, _ in links],
                               lambda: self.index.urls(watch_id))

    def _doubt(self, mark: Mark, links: int) -> str | None:
        """Why a check's links are not to be believed (a consent wall, a challenge, an error
        page served with 200, an empty body), or None. A doubted check is neither the
        baseline nor a source of alerts; after ``DOUBTS`` in a row that found links, the page
        is taken as it is (a small page is small, a slimmer redesign is real)."""
        if not links:
            return "no links found: the first check that finds links is the baseline" if not mark.baselined else \
                "no links found: a consent wall, a challenge or an error page?"
        if mark.doubts + 1 >= DOUBTS:
            return None
        if not mark.baselined and links < self.layout.baseline_min_links:
            return f"only {links} links: not taken as the baseline yet (a consent wall, a challenge or an error page?)"
        if mark.links and links < SHRUNK * mark.links:
            return (f"only {links} of the page's {mark.links} links: a consent wall or an error page? "
                    "Its new links are recorded without alerts")
        return None

    def _layout_changed(self, new: int, links: int) -> bool:
        """Whether so many of a page's links are new at once that the page changed, not its news."""
        return new >= self.layout.min_links and new > self.layout.fraction * links

    def _held_back(self, watch_id: int, tag: str | None, page_url: str, new: list) -> set[str]:
        """The URLs of new links the watch's rules keep from alerting (recorded all the same)."""
        signature = self.store.filters_signature()
        if signature != self.rules_signature:  # a rule added or removed applies from the next link on
            self.rules, self.rules_signature = self.store.list_filters(), signature
        link_filter = filters.for_watch(self.rules, watch_id, tag, page_url, self.site_pages)
        if not link_filter:
            return set()
        held = {link.url: reason for link in new if (reason := link_filter.held_back(link.url, link.text))}
        if held:
            self.log.info("alerts held back by filters", watch_id=watch_id, links=len(held),
                          first=next(iter(held.values())))
        return set(held)

    @staticmethod
    def _normalised_links(task: Task, ignore: frozenset[str], ignored: frozenset[str]) -> list[tuple]:
        """``(url, text, former forms)`` of each valid link (see LinkIndex.new_links): compared
        without the ``ignore``\\ d query parameters, and known too under its form without the
        ones ``ignored`` until now, or as it was remembered before comparable forms."""
        links = []
        for link in task.context:
            try:
                normal = normalize(link["url"])
            except BadURL:
                continue
            url = comparable(normal, ignore)
            formers = {normal, comparable(normal, ignored)} - {url} if ignored != ignore else \
                (() if normal == url else (normal,))
            links.append((url, link["text"], tuple(formers)))
        return links

    def apply(self, key: bytes, record: dict, recovering: bool) -> int:
        """Apply one outbox record to SQLite and the sinks, then drop it from the outbox."""
        checks = record["checks"] if "checks" in record else [record]  # one task per record before groups
        results, alerts = [], []
        for check in checks:
            checked_at = check["checked_at"]
            validators = check.get("validators")
            # (A record written before a check could carry several notices has one "notice".)
            notices = [tuple(notice) for notice in check.get("notices", [check["notice"]] if check.get("notice") else [])]
            results.append(CheckResult(
                watch_id=check["watch_id"], checked_at=checked_at, status=check["status"],
                http_status=check["http_status"], elapsed_ms=check["elapsed_ms"], parse_ms=check.get("parse_ms"),
                links=[LinkRecord(link["url"], link["text"], link["code"], checked_at) for link in check["links"]],
                alert_ids={link["url"]: link["alert_id"] for link in check["links"] if link["alert_id"]},
                outcome=check.get("outcome", "ok"), validators=None if validators is None else Validators(*validators),
                fetched_at=check.get("fetched_at"), notices=tuple(notices), health=check.get("health"),
                volatile=tuple(check.get("volatile", ())), found=check.get("found"),
                adopted_selector=check.get("adopted_selector"),
            ))
            alerts.extend(Alert(link["alert_id"], check["watch_id"], redact(check["base_url"]), link["url"], link["text"],
                                checked_at) for link in check["links"] if link["alert_id"])
            alerts.extend(Alert(alert_id, check["watch_id"], redact(check["base_url"]), redact(check["base_url"]),
                                text, checked_at) for alert_id, text in notices)
        applied = self.store.record_results(results)
        # A record replayed after its watch was removed (or a stale one) alerts nobody.
        alerts = [alert for alert in alerts if alert.watch_id in applied]
        for sink in self.sinks:
            pending = alerts
            if recovering and alerts:
                already = sink.delivered({alert.alert_id for alert in alerts})
                pending = [alert for alert in alerts if alert.alert_id not in already]
            sink.deliver(pending)
        self.index.done(key)
        return len(alerts)

    def drain_outbox(self, channel=None) -> int:
        """Apply every outbox record a crash or a failure left behind; return how many were
        applied. A group record that fails is split into one record per check, so one check
        that cannot be applied leaves only itself behind (and the records after it go on).
        A record that fails ``QUARANTINE_AFTER`` times is moved to ``dead_letter`` (through
        ``channel``, when given), where ``monitor dlq list`` shows it and why."""
        applied = failed = 0
        for key, record in self.index.outbox():
            try:
                self.apply(key, record, recovering=True)
                applied += 1
                continue
            except INFRASTRUCTURE:
                self.outbox_dirty = True
                raise  # the stores are unavailable, not the record at fault: it stays for later
            except Exception as exc:
                checks = record.get("checks", [])
                if len(checks) < 2:
                    failed += not self._failed(key, record, exc, channel)
                    continue
            for part_key, part in self.index.split(key, [{"checks": [check]} for check in checks]):
                try:
                    self.apply(part_key, part, recovering=True)
                    applied += 1
                except INFRASTRUCTURE:
                    self.outbox_dirty = True
                    raise
                except Exception as exc:
                    failed += not self._failed(part_key, part, exc, channel)
        self.outbox_dirty = failed > 0
        if applied:
            self.log.info("outbox drained", records=applied, left=failed)
        return applied

    def _failed(self, key: bytes, record: dict, exc: Exception, channel) -> bool:
        """Count a failed attempt at an outbox record; quarantine it after the last one.
        Return whether it is out of the outbox now."""
        reason = describe(exc)
        watch_ids = [check.get("watch_id") for check in record.get("checks", [record])]
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if self.attempts[key] < QUARANTINE_AFTER or channel is None:
            self.log.error("outbox record failed, left for a later attempt", reason=reason, watch_ids=watch_ids,
                           attempt=self.attempts[key])
            return False
        amqp.publish(channel, amqp.DEAD_LETTER, json.dumps(record, ensure_ascii=True).encode("ascii"),
                     headers={"x-first-death-queue": QUARANTINE, "x-first-death-reason": f"apply failed: {reason}"})
        self.index.done(key)
        del self.attempts[key]
        self.log.error("outbox record quarantined to dead_letter", reason=reason, watch_ids=watch_ids)
        return True

    def forget_removed(self) -> None:
        """Delete the index entries of watches removed from the list (LevelDB is this
        process's alone, so the CLI leaves the ids in the store for it)."""
        try:
            removed = self.store.removed_watches()
            if removed:
                keys = self.index.forget(removed)
                self.store.forget_removed(removed)
                self.log.info("index entries of removed watches deleted", watches=len(removed), keys=keys)
        except INFRASTRUCTURE as exc:  # the next quiet moment tries again
            self.log.warning("index entries of removed watches not deleted yet", reason=str(exc)[:300])

    def on_group(self, channel, group: list[tuple[int, Task]]) -> None:
        """Handle a group of deliveries: one ``multiple`` ack once their effects are durable.
        If the group fails, each task is tried alone (see :meth:`_one_by_one`)."""
        try:
            if self.outbox_dirty:
                self.drain_outbox(channel)
            alerts = self.handle_group([task for _, task in group])
        except Exception:
            self.log.error("group failed, retrying task by task", exc_info=True, tasks=len(group))
            self.outbox_dirty = True
            for tag, task in group:
                self._one_by_one(channel, tag, task)
            return
        channel.basic_ack(group[-1][0], multiple=True)
        self.log.info("processed", tasks=len(group), links=sum(len(task.context) for _, task in group), alerts=alerts)

    def _one_by_one(self, channel, tag: int, task: Task) -> None:
        """Apply one task: acked once durable; rejected to ``dead_letter`` if the task itself
        is at fault; held (and tried again, backing off) while SQLite, LevelDB, a sink or
        the disk is unavailable. Requeueing it instead would count towards its delivery
        limit on RabbitMQ 3 and dead-letter a healthy task."""
        delay = 0.5
        while True:
            try:
                if self.outbox_dirty:
                    self.drain_outbox(channel)
                self.handle(task)
            except INFRASTRUCTURE as exc:
                self.outbox_dirty = True
                self.log.warning("store unavailable, holding the task", watch_id=task.id, retry_in_s=delay,
                                 reason=describe(exc))
                if self.stop.is_set():
                    return  # unacked: the broker gives it back when the connection closes
                channel.connection.sleep(delay)  # keeps the connection's heartbeats going
                delay = min(delay * 2, 15.0)
                continue
            except Exception as exc:
                self.log.error("task rejected to dead_letter: applying it failed", watch_id=task.id,
                               reason=describe(exc))
                channel.basic_reject(tag, requeue=False)
                return
            channel.basic_ack(tag)
            return


def consume_groups(config: configuration.Config, processor: Processor, stop) -> None:
    """Consume ``task_queue`` in groups until ``stop`` is set, reconnecting as needed. A
    message that fails validation, or whose token this home did not sign (it is not the
    result of a job the scheduler issued), is rejected to ``dead_letter`` on its own (a
    later ``multiple`` ack never covers it: it is no longer outstanding)."""
    log = processor.log
    key = HomeKey.load(config.home)

    def session(connection) -> None:
        channel = amqp.open_channel(connection, config, config.processor_prefetch)
        log.info("consuming", queue=amqp.TASK_QUEUE, prefetch=config.processor_prefetch, batch=config.processor_batch)
        group: list[tuple[int, Task]] = []
        started, links = 0.0, 0
        forgotten_at = 0.0
        for method, _properties, body in channel.consume(amqp.TASK_QUEUE, inactivity_timeout=GROUP_WAIT):
            if method is None and time.monotonic() - forgotten_at > FORGET_EVERY:  # a quiet moment
                forgotten_at = time.monotonic()
                processor.forget_removed()
            if method is not None:
                try:
                    task = Task.from_bytes(body)
                    if not key.verify(task.id, task.token):
                        raise InvalidMessage("no valid token: the task is not for a job this home issued")
                    group.append((method.delivery_tag, task))
                    started = started or time.monotonic()
                    links += len(task.context)
                except InvalidMessage as exc:
                    log.warning("message rejected to dead_letter", queue=amqp.TASK_QUEUE, reason=str(exc))
                    channel.basic_reject(method.delivery_tag, requeue=False)
            full = len(group) >= config.processor_batch or links >= GROUP_LINKS
            if group and (method is None or full or time.monotonic() - started > 4 * GROUP_WAIT):
                processor.on_group(channel, group)
                group, started, links = [], 0.0, 0
            if stop.is_set() and not group:
                break
        channel.cancel()

    amqp.reconnecting(config, log, stop, session)


def main() -> None:
    config = configuration.load()
    stop = amqp.stop_on_signals()
    store = open_store(config.db_path)
    index = LinkIndex(config.leveldb_path)
    processor = Processor(store, index, build_sinks(config), stop,
                          LayoutRule(config.layout_change_fraction, config.layout_change_min_links,
                                     config.baseline_min_links),
                          Reappearance(config.renotify_after), HealthRule(config.broken_after))
    try:
        processor.drain_outbox()  # before consuming: alerts a crash left half-delivered go out first
    except INFRASTRUCTURE as exc:
        processor.log.warning("outbox not drained yet: the stores are unavailable", reason=str(exc)[:300])
    try:
        consume_groups(config, processor, stop)
    finally:
        index.close()
        store.close()


if __name__ == "__main__":
    main()

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
one "layout changed" alert, about the page itself, says so.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass

import plyvel

from monitor import amqp, filters
from monitor import config as configuration
from monitor.homekey import HomeKey
from monitor.linkindex import LinkIndex
from monitor.log import describe, get_logger
from monitor.messages import Alert, InvalidMessage, Task
from monitor.sinks import Sink, build_sinks
from monitor.store import CheckResult, LinkRecord, Store, Validators, open_store
from monitor.urls import BadURL, comparable, normalize, redact

GROUP_WAIT = 0.05  # seconds a group waits for more tasks once the queue goes quiet
# Errors of the stores or the disk, not of the task in hand: wait for them to pass.
INFRASTRUCTURE = (sqlite3.OperationalError, OSError, plyvel.Error)
FORGET_EVERY = 60.0  # seconds between looks for removed watches whose index entries can go
QUARANTINE_AFTER = 3  # failed attempts before an outbox record is moved aside
QUARANTINE = "outbox"  # the origin `monitor dlq list` shows for a quarantined outbox record
GROUP_LINKS = 20_000  # a group closes at this many links too: its memory is bounded, whatever the pages


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
    page's links new, the page changed (a redesign, a move to https), not its news."""
    fraction: float = 0.5
    min_links: int = 20


class Processor:
    def __init__(self, store: Store, index: LinkIndex, sinks: list[Sink], stop: threading.Event | None = None,
                 layout: "LayoutRule | None" = None) -> None:
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
        self.rules: list[filters.Rule] = []  # the filters' rules, read again when they change
        self.rules_signature: tuple | None = None

    def handle(self, task: Task) -> int:
        """Make one task's effects durable; return the number of alerts raised."""
        return self.handle_group([task])

    def handle_group(self, tasks: list[Task]) -> int:
        """Make a group of tasks' effects durable together; return the number of alerts raised."""
        watches = self.store.last_fetched({task.id for task in tasks})  # those still on the list
        pending: dict[bytes, list] = {}  # index entries of this group, read or written
        entries: dict[bytes, list] = {}  # those to write
        baselines: set[int] = set()
        checks = []
        checked_at = time.time()
        for task in tasks:
            if task.id not in watches:
                self.log.info("task for a removed watch dropped", watch_id=task.id, url=redact(task.base_url))
                continue
            url, newest, tag = watches[task.id]  # the URL from the store: a task's baseUrl is not trusted
            if None not in (task.fetched_at, newest) and task.fetched_at < newest:
                # A timed-out job's late result, or a replayed dead letter: the watch has a newer one.
                self.log.info("stale result dropped", watch_id=task.id, fetched_at=task.fetched_at, newer=newest)
                continue
            watches[task.id] = (url, task.fetched_at if task.fetched_at is not None else newest, tag)
            new, baseline, held_back, notice, status = [], False, set(), None, _status(task)
            if task.status == "ok":
                baseline = task.id not in baselines and not self.index.is_baselined(task.id)
                if baseline and not task.context:
                    # A consent wall, a script-only shell or an empty body: a baseline of nothing
                    # would make every link of the real page new. The first check with links is it.
                    status = "ok (no links found: the first check that finds links is the baseline)"
                elif baseline:
                    baselines.add(task.id)
                new, written = self.index.new_links(task.id, self._normalised_links(task), pending)
                entries.update(written)
                held_back = self._held_back(task.id, tag, url, new) if new and not baseline else set()
                if not baseline and self._layout_changed(len(new), len(task.context)):
                    # A redesign or a move to https renews most links at once: one alert says
                    # so, and the new links are adopted silently.
                    held_back = {link.url for link in new}
                    notice = (f"{task.id}-layout-{int(checked_at)}",
                              f"layout changed: {len(new)} of {len(task.context)} links are new at once "
                              "(adopted without an alert each)")
                    self.log.warning("layout changed", watch_id=task.id, new=len(new), links=len(task.context))
            validators = None if task.status in ("error", "skipped") else \
                [task.etag, task.last_modified, task.content_hash]
            checks.append({
                "watch_id": task.id, "base_url": url, "checked_at": checked_at, "fetched_at": task.fetched_at,
                "status": status, "outcome": _outcome(task), "validators": validators,
                "http_status": task.http_status, "elapsed_ms": task.elapsed_ms,
                "links": [{"url": link.url, "text": link.text, "code": link.code,
                           "alert_id": None if baseline or link.url in held_back else link.alert_id} for link in new],
                "notice": notice,
            })
        if not checks:
            return 0
        key = self.index.commit(entries, baselines, {"checks": checks})
        return self.apply(key, {"checks": checks}, recovering=False)

    def _layout_changed(self, new: int, links: int) -> bool:
        """Whether so many of a page's links are new at once that the page changed, not its news."""
        return new >= self.layout.min_links and new > self.layout.fraction * links

    def _held_back(self, watch_id: int, tag: str | None, page_url: str, new: list) -> set[str]:
        """The URLs of new links the watch's rules keep from alerting (recorded all the same)."""
        signature = self.store.filters_signature()
        if signature != self.rules_signature:  # a rule added or removed applies from the next link on
            self.rules, self.rules_signature = self.store.list_filters(), signature
        link_filter = filters.for_watch(self.rules, watch_id, tag, page_url)
        if not link_filter:
            return set()
        held = {link.url: reason for link in new if (reason := link_filter.held_back(link.url, link.text))}
        if held:
            self.log.info("alerts held back by filters", watch_id=watch_id, links=len(held),
                          first=next(iter(held.values())))
        return set(held)

    @staticmethod
    def _normalised_links(task: Task) -> list[tuple[str, str, str]]:
        """``(comparable url, text, normalised url)`` of each valid link (see LinkIndex.new_links)."""
        links = []
        for link in task.context:
            try:
                normal = normalize(link["url"])
            except BadURL:
                continue
            links.append((comparable(normal), link["text"], normal))
        return links

    def apply(self, key: bytes, record: dict, recovering: bool) -> int:
        """Apply one outbox record to SQLite and the sinks, then drop it from the outbox."""
        checks = record["checks"] if "checks" in record else [record]  # one task per record before groups
        results, alerts = [], []
        for check in checks:
            checked_at = check["checked_at"]
            validators = check.get("validators")
            results.append(CheckResult(
                watch_id=check["watch_id"], checked_at=checked_at, status=check["status"],
                http_status=check["http_status"], elapsed_ms=check["elapsed_ms"],
                links=[LinkRecord(link["url"], link["text"], link["code"], checked_at) for link in check["links"]],
                alert_ids={link["url"]: link["alert_id"] for link in check["links"] if link["alert_id"]},
                outcome=check.get("outcome", "ok"), validators=None if validators is None else Validators(*validators),
                fetched_at=check.get("fetched_at"), notice=tuple(check["notice"]) if check.get("notice") else None,
            ))
            alerts.extend(Alert(link["alert_id"], check["watch_id"], redact(check["base_url"]), link["url"], link["text"],
                                checked_at) for link in check["links"] if link["alert_id"])
            if check.get("notice"):
                alert_id, text = check["notice"]
                alerts.append(Alert(alert_id, check["watch_id"], redact(check["base_url"]), redact(check["base_url"]),
                                    text, checked_at))
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
                          LayoutRule(config.layout_change_fraction, config.layout_change_min_links))
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

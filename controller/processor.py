"""The processor: consume ``task_queue``, find the links never seen for each watch, record
them and raise alerts.

Per task, exactly once in effect:

1. normalise each link URL and look its 6-character code up in LevelDB;
2. write the new index entries, the baseline marker and an outbox record of the task's
   effects in one synced LevelDB batch;
3. apply the outbox record: SQLite (links, alerts, watch status) in one transaction,
   then every alert sink; then delete the record;
4. ack the task.

A crash anywhere leaves either an unacked task (redelivered; its links are now known, so
nothing doubles) or an outbox record (applied again at start; SQLite inserts are
idempotent and sinks skip alert ids they already have).
The first successful check of a watch is its baseline: links recorded, no alerts.
"""
from __future__ import annotations

import time

from monitor import amqp
from monitor import config as configuration
from monitor.linkindex import LinkIndex
from monitor.log import get_logger
from monitor.messages import Alert, Task
from monitor.sinks import Sink, build_sinks
from monitor.store import CheckResult, LinkRecord, NotFound, Store, open_store
from monitor.urls import BadURL, normalize


def _status(task: Task) -> str:
    """The one line ``watch list`` shows: ``ok``, ``ok (<warning>)``, ``error: <reason>`` or
    ``skipped: <reason>``."""
    if task.status == "ok":
        return f"ok ({task.error})" if task.error else "ok"
    return f"{task.status}: {task.error or 'no reason given'}"


class Processor:
    def __init__(self, store: Store, index: LinkIndex, sinks: list[Sink]) -> None:
        self.store = store
        self.index = index
        self.sinks = sinks
        self.log = get_logger("processor")
        self.outbox_dirty = True  # drain before the first task: a crash may have left records

    def handle(self, task: Task) -> int:
        """Make the task's effects durable; return the number of alerts raised."""
        try:
            self.store.get_watch(task.id)
        except NotFound:
            self.log.info("task for a removed watch dropped", watch_id=task.id, url=task.base_url)
            return 0
        new, entries, baseline = [], {}, False
        if task.status == "ok":
            baseline = not self.index.is_baselined(task.id)
            new, entries = self.index.new_links(task.id, self._normalised_links(task))
        record = {
            "watch_id": task.id, "base_url": task.base_url, "checked_at": time.time(),
            "status": _status(task), "http_status": task.http_status, "elapsed_ms": task.elapsed_ms,
            "links": [{"url": link.url, "text": link.text, "code": link.code,
                       "alert_id": None if baseline else link.alert_id} for link in new],
        }
        key = self.index.commit(task.id, entries, record, baseline=baseline)
        return self.apply(key, record, recovering=False)

    @staticmethod
    def _normalised_links(task: Task) -> list[tuple[str, str]]:
        links = []
        for link in task.context:
            try:
                links.append((normalize(link["url"]), link["text"]))
            except BadURL:
                continue
        return links

    def apply(self, key: bytes, record: dict, recovering: bool) -> int:
        """Apply one outbox record to SQLite and the sinks, then drop it from the outbox."""
        checked_at = record["checked_at"]
        links = [LinkRecord(link["url"], link["text"], link["code"], checked_at) for link in record["links"]]
        self.store.record_result(CheckResult(
            watch_id=record["watch_id"], checked_at=checked_at, status=record["status"],
            http_status=record["http_status"], elapsed_ms=record["elapsed_ms"], links=links,
            alert_ids={link["url"]: link["alert_id"] for link in record["links"] if link["alert_id"]},
        ))
        alerts = [Alert(link["alert_id"], record["watch_id"], record["base_url"], link["url"], link["text"], checked_at)
                  for link in record["links"] if link["alert_id"]]
        for sink in self.sinks:
            pending = alerts
            if recovering and alerts:
                already = sink.delivered({alert.alert_id for alert in alerts})
                pending = [alert for alert in alerts if alert.alert_id not in already]
            sink.deliver(pending)
        self.index.done(key)
        return len(alerts)

    def drain_outbox(self) -> int:
        """Apply every outbox record a crash left behind; return how many there were."""
        count = 0
        for key, record in self.index.outbox():
            self.apply(key, record, recovering=True)
            count += 1
        self.outbox_dirty = False
        if count:
            self.log.info("outbox drained after restart", records=count)
        return count

    def on_task(self, channel, method, task: Task) -> None:
        """Handle one task: acked once its effects are durable, requeued if they could not be made so."""
        try:
            if self.outbox_dirty:
                self.drain_outbox()
            alerts = self.handle(task)
        except Exception:
            # SQLite busy past its timeout, a full disk, a sink that cannot write: retry later;
            # the queue's delivery limit dead-letters a task that can never succeed.
            self.log.error("task failed, requeued", exc_info=True, watch_id=task.id)
            self.outbox_dirty = True
            channel.basic_nack(method.delivery_tag, requeue=True)
            time.sleep(1.0)
            return
        channel.basic_ack(method.delivery_tag)
        self.log.info("processed", watch_id=task.id, status=task.status, links=len(task.context),
                      alerts=alerts, redelivered=method.redelivered)


def main() -> None:
    config = configuration.load()
    stop = amqp.stop_on_signals()
    store = open_store(config.db_path)
    index = LinkIndex(config.leveldb_path)
    processor = Processor(store, index, build_sinks(config))
    try:
        processor.drain_outbox()  # before consuming: alerts a crash left half-delivered go out first
        amqp.run_consumer(config, amqp.TASK_QUEUE, config.processor_prefetch, Task, processor.on_task, processor.log, stop)
    finally:
        index.close()
        store.close()


if __name__ == "__main__":
    main()

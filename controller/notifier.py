"""The notifier: deliver every alert to every sink it is meant for, and keep the Atom
feeds current.

The processor queues an alert for its sinks in the SQLite transaction that records it
(``deliveries``, see migrations/0009_sinks.sql), so this process only reads durable rows.
Twice a second it:

0. applies the sinks and filters declared in the TOML file, at start and when it changed
   (see :mod:`monitor.sinks.declared`);
1. records the outcome of each send that finished: ``delivered``, or a failed attempt
   (tried again after ``sink_retry_first`` seconds doubling per attempt, at most
   ``sink_retry_max``; after ``sink_max_attempts`` the delivery is ``failed``, the sink's
   dead letter, which ``monitor alerts failed`` lists and ``monitor alerts retry`` revives);
2. for each sink with no send in flight and alerts due, starts one send of up to its
   channel's ``batch`` alerts in a thread of its own: a slow or failing sink delays
   nobody else. A channel that gathers alerts (an e-mail digest) is due only once its
   oldest alert has waited the channel's ``hold``, or ``batch`` alerts wait: until then
   they stay pending rows, so a restart loses none and holding costs one query a round;
3. at most every ``FEED_EVERY`` seconds, rewrites the feeds of the watches and tags that
   have new alerts.

A send is recorded only after it returns, so a crash in between sends it again (a digest
whole): each alert reaches each sink at least once (receivers drop duplicates by
``alert_id``) and is recorded once per sink.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from monitor import amqp
from monitor import config as configuration
from monitor.log import describe, get_logger
from monitor.sinks.channels import BadTarget, Channel, DeliveryFailed, build
from monitor.sinks.declared import Declarations
from monitor.sinks.feeds import write_feeds
from monitor.store import Store, open_store

POLL = 0.5  # seconds between rounds
SENDERS = 16  # sinks sending at once
# Seconds between feed rewrites: a burst of alerts (hundreds of pages changing in one round)
# is written once, not once per poll, and leaves the CPU to the checks meanwhile.
FEED_EVERY = 10.0
POSITION = ".position"  # in the feeds directory: how far the feeds go (an alert rowid)


def feeds_position(config: configuration.Config) -> int:
    """The newest alert rowid the feeds on disk include (0: none written yet)."""
    try:
        return int((config.feeds_dir / POSITION).read_text())
    except (OSError, ValueError):
        return 0


class Notifier:
    def __init__(self, config: configuration.Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.log = get_logger("notifier")
        self.pool = ThreadPoolExecutor(SENDERS, thread_name_prefix="send")
        self.channels: dict[str, tuple[str, Channel]] = {}  # sink name -> (its definition, its channel)
        self.sending: dict[str, tuple[Future, list[str]]] = {}  # sink name -> (send, alert ids)
        self.feeds_at = feeds_position(config)  # the newest alert rowid the feeds include
        self.feeds_written_at = 0.0
        self.declarations = Declarations(configuration.config_file(), store, self.log)

    def round(self, now: float) -> None:
        """One round: apply the TOML file's sinks and filters if it changed, record
        finished sends, start due ones, refresh the feeds."""
        self.declarations.refresh(now)
        self.collect(now)
        self.dispatch(now)
        self.refresh_feeds(now)

    def collect(self, now: float, wait: bool = False) -> None:
        for name, (send, alert_ids) in list(self.sending.items()):
            if not (wait or send.done()):
                continue
            del self.sending[name]
            error = send.exception()
            if error is None:
                self.store.delivered(name, alert_ids, now)
                self.log.info("delivered", sink=name, alerts=len(alert_ids))
            else:
                self.failed(name, alert_ids, str(error) if isinstance(error, DeliveryFailed) else describe(error), now)

    def failed(self, name: str, alert_ids: list[str], reason: str, now: float) -> None:
        gave_up = self.store.delivery_failed(name, alert_ids, reason, now, self.config.sink_retry_first,
                                             self.config.sink_retry_max, self.config.sink_max_attempts)
        self.log.warning("delivery failed", sink=name, alerts=len(alert_ids), reason=reason, gave_up=gave_up)

    def dispatch(self, now: float) -> None:
        for name, (kind, target, options) in self.store.sink_definitions().items():
            if name in self.sending:
                continue
            try:
                channel = self.channel(name, kind, target, options)
            except BadTarget as exc:  # e.g. an Apprise plugin gone since the sink was added
                stuck = [alert["alert_id"] for alert in self.store.due_deliveries(name, now, 100)]
                if stuck:
                    self.failed(name, stuck, str(exc), now)
                continue
            next_send = self.store.next_delivery_at(name, channel.hold, channel.batch)
            if next_send is None or next_send > now:
                continue
            alerts = self.store.due_deliveries(name, now, channel.batch)
            if alerts:
                self.sending[name] = (self.pool.submit(channel.send, alerts), [a["alert_id"] for a in alerts])

    def channel(self, name: str, kind: str, target: str, options: dict) -> Channel:
        """The sink's channel, built again when its definition changed."""
        definition = json.dumps([kind, target, options], sort_keys=True)
        cached = self.channels.get(name)
        if cached is None or cached[0] != definition:
            cached = (definition, build(kind, target, options))
            self.channels[name] = cached
        return cached[1]

    def refresh_feeds(self, now: float) -> None:
        """Rewrite the feeds that have alerts newer than the last rewrite (all of them the
        first time a home has feeds); remember how far they go, so a restart rewrites only
        what changed meanwhile, not one feed per watch."""
        if now - self.feeds_written_at < FEED_EVERY:
            return
        newest, watch_ids, tags = self.store.alerts_since(self.feeds_at)
        if newest == self.feeds_at and (self.config.feeds_dir / "all.atom").exists():
            return
        written = write_feeds(self.store, self.config.feeds_dir, watch_ids, tags, now)
        (self.config.feeds_dir / POSITION).write_text(str(newest))
        self.feeds_at, self.feeds_written_at = newest, now
        self.log.info("feeds written", feeds=written)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.round(time.time())
            stop.wait(POLL)
        self.collect(time.time(), wait=True)  # sends in flight finish (they are bounded by timeouts)
        self.pool.shutdown()


def main() -> None:
    config = configuration.load()
    stop = amqp.stop_on_signals()
    store = open_store(config.db_path)
    notifier = Notifier(config, store)
    notifier.log.info("starting", sinks=len(store.sink_names()))
    try:
        notifier.run(stop)
    finally:
        store.close()
    notifier.log.info("stopped")


if __name__ == "__main__":
    main()

"""The proxy and heartbeat master (the VPN patent's master): the controller side of the fleet.

* answers lease requests on ``control`` (request/reply): proxies from the pool, the least
  shared and least recently leased first (a proxy serves several workers when the pool is
  smaller than the fleet), never one the host in question refused recently nor one that
  failed itself recently, with the pool's size (0 means "fetch directly") and the hosts in cooldown;
* decides host cooldowns: it remembers which exits each host refused (workers report them
  when they ask for another exit) and disables a host only when every exit of the pool has
  been refused by it in the last ``REFUSAL_MEMORY`` seconds, for longer each time in a row
  (``Store.disable_host``); it records the cooldown (so workers that start later learn it)
  and announces it on ``host_events`` (where ``monitor hosts enable`` announces a lift);
* records heartbeats (``heartbeats``) in the workers table, with per-proxy counters;
* tells runs of one worker name apart (pid and start time): a worker restarted by
  supervisord gets fresh leases, and its previous run's go back to the pool;
* every second, marks workers silent for ``worker_lost_after`` seconds as lost and returns
  their proxies to the pool; every minute, drops the oldest dead letters beyond
  ``dead_letter_max``; every hour, prunes rows of no further use (``Store.prune``).
"""
from __future__ import annotations

import time

from monitor import amqp, deadletters
from monitor import config as configuration
from monitor.log import get_logger
from monitor.messages import DIRECT, Heartbeat, HostDisabled, InvalidMessage, LeaseReply, LeaseRequest
from monitor.store import Store, open_store

REFUSAL_MEMORY = 600.0  # seconds a host's refusal of an exit counts towards disabling the host
TRIM_EVERY = 60.0  # seconds between checks that dead_letter holds at most dead_letter_max messages
PRUNE_EVERY = 3600.0  # seconds between prunings of old fleet rows (see Store.prune)
BROKEN_PROXY_REST = 60.0  # seconds a proxy that failed itself is granted to nobody


class Master:
    def __init__(self, config: configuration.Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.log = get_logger("master")
        self.pruned_at = self.trimmed_at = 0.0

    def on_request(self, channel, method, properties, body: bytes) -> None:
        try:
            request = LeaseRequest.from_bytes(body)
        except InvalidMessage as exc:
            self.log.warning("control request dropped", reason=str(exc))
            channel.basic_ack(method.delivery_tag)
            return
        now = time.time()
        self.store.end_earlier_runs(request.worker, request.run)
        if request.op == "release":
            released = self.store.release_proxies(request.worker, request.proxies or None)
            self.log.info("proxies released", worker=request.worker, count=released)
            proxies, pool_size = [], self.store.pool_size()
        else:
            proxies, pool_size = self.lease(request, now, channel)
        if properties.reply_to:
            amqp.reply(channel, properties, LeaseReply(proxies, pool_size, self.store.cooldowns(now)).to_bytes())
        channel.basic_ack(method.delivery_tag)

    def lease(self, request: LeaseRequest, now: float, channel) -> tuple[list[dict], int]:
        """Grant a lease request; first record what it reports (failed proxies, a host's
        refusals) and disable the host if every exit of the pool has refused it."""
        if request.broken:
            self.store.proxies_failed(request.broken, now)
        if request.host and request.refused:
            self.store.record_refusals(request.host, request.refused, now)
        leased, pool_size = self.store.lease_proxies(
            request.worker, request.run, request.count, request.exclude, now, request.host,
            refused_since=now - REFUSAL_MEMORY, failed_since=now - BROKEN_PROXY_REST)
        refused = request.host and not leased and self.store.refused_by_every_exit(request.host, now - REFUSAL_MEMORY)
        if refused:
            reason = ("refused the direct connection (no proxies configured)" if refused == [DIRECT]
                      else f"refused every exit of the pool ({len(refused)})")
            cooldown = self.store.disable_host(
                request.host, now, self.config.host_cooldown_first, self.config.host_cooldown, reason,
                ", ".join("direct" if exit_id == DIRECT else f"proxy {exit_id}" for exit_id in refused), request.worker)
            amqp.publish(channel, "", HostDisabled(request.host, cooldown.until, reason, request.worker).to_bytes(),
                         exchange=amqp.HOST_EVENTS)
            self.log.warning("host disabled", host=request.host, until=cooldown.until, strikes=cooldown.strikes,
                             reason=reason, asked_by=request.worker)
        self.log.info("proxies leased", worker=request.worker, asked=request.count, granted=len(leased),
                      proxy_ids=[proxy.id for proxy in leased], host=request.host)
        return [{"id": proxy.id, "url": proxy.url} for proxy in leased], pool_size

    def on_heartbeat(self, channel, method, properties, body: bytes) -> None:
        try:
            self.store.record_heartbeat(Heartbeat.from_bytes(body), time.time())
        except InvalidMessage as exc:
            self.log.warning("heartbeat dropped", reason=str(exc))
        channel.basic_ack(method.delivery_tag)

    def check_fleet(self, channel) -> None:
        now = time.time()
        for worker in self.store.mark_lost(now, self.config.worker_lost_after):
            self.log.warning("worker lost, its proxies return to the pool", worker=worker)
        if now - self.trimmed_at >= TRIM_EVERY:
            self.trimmed_at = now
            dropped = deadletters.trim(channel, self.config.dead_letter_max)
            if dropped:
                self.log.warning("oldest dead letters dropped", count=dropped, kept=self.config.dead_letter_max)
        if now - self.pruned_at >= PRUNE_EVERY:
            self.pruned_at = now
            removed = self.store.prune(now, now - REFUSAL_MEMORY)
            if any(removed.values()):
                self.log.info("old rows pruned", **removed)

    def run(self, stop) -> None:
        """Serve until ``stop`` is set, reconnecting whenever the broker goes away."""
        def session(connection) -> None:
            channel = amqp.open_channel(connection, self.config, prefetch=100)
            for queue, handler in ((amqp.CONTROL_QUEUE, self.on_request), (amqp.HEARTBEAT_QUEUE, self.on_heartbeat)):
                channel.basic_consume(queue, amqp.rejecting_failures(handler, self.log, queue))
            self.log.info("serving", queues=[amqp.CONTROL_QUEUE, amqp.HEARTBEAT_QUEUE])
            last_check = 0.0
            while not stop.is_set():
                connection.process_data_events(time_limit=1.0)
                if time.monotonic() - last_check >= 1.0:
                    self.check_fleet(channel)
                    last_check = time.monotonic()

        amqp.reconnecting(self.config, self.log, stop, session)


def main() -> None:
    config = configuration.load()
    stop = amqp.stop_on_signals()
    store = open_store(config.db_path)
    master = Master(config, store)
    master.log.info("starting", lost_after_s=config.worker_lost_after)
    master.run(stop)
    store.close()


if __name__ == "__main__":
    main()

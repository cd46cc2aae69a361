"""The proxy and heartbeat master (the VPN patent's master): the controller side of the fleet.

* answers lease requests on ``control`` (request/reply): free proxies from the pool,
  least recently leased first, with the pool's size (0 means "fetch directly") and the
  hosts in cooldown;
* records heartbeats (``heartbeats``) in the workers table, with per-proxy counters;
* records host cooldowns announced on ``host_events`` (so workers that start later learn them);
* every second, marks workers silent for ``worker_lost_after`` seconds as lost and returns
  their proxies to the pool.
"""
from __future__ import annotations

import time

from monitor import amqp
from monitor import config as configuration
from monitor.log import get_logger
from monitor.messages import Heartbeat, HostDisabled, InvalidMessage, LeaseReply, LeaseRequest
from monitor.store import Store, open_store


class Master:
    def __init__(self, config: configuration.Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.log = get_logger("master")

    def on_request(self, channel, method, properties, body: bytes) -> None:
        try:
            request = LeaseRequest.from_bytes(body)
        except InvalidMessage as exc:
            self.log.warning("control request dropped", reason=str(exc))
            channel.basic_ack(method.delivery_tag)
            return
        now = time.time()
        if request.op == "release":
            released = self.store.release_proxies(request.worker)
            self.log.info("proxies released", worker=request.worker, count=released)
            proxies, pool_size = [], self.store.pool_size()
        else:
            leased, pool_size = self.store.lease_proxies(request.worker, request.count, request.exclude, now)
            proxies = [{"id": proxy.id, "url": proxy.url} for proxy in leased]
            self.log.info("proxies leased", worker=request.worker, asked=request.count, granted=len(proxies),
                          proxy_ids=[proxy["id"] for proxy in proxies])
        if properties.reply_to:
            amqp.reply(channel, properties, LeaseReply(proxies, pool_size, self.store.cooldowns(now)).to_bytes())
        channel.basic_ack(method.delivery_tag)

    def on_heartbeat(self, channel, method, properties, body: bytes) -> None:
        try:
            self.store.record_heartbeat(Heartbeat.from_bytes(body), time.time())
        except InvalidMessage as exc:
            self.log.warning("heartbeat dropped", reason=str(exc))
        channel.basic_ack(method.delivery_tag)

    def on_host_event(self, channel, method, properties, body: bytes) -> None:
        try:
            event = HostDisabled.from_bytes(body)
        except InvalidMessage as exc:
            self.log.warning("host event dropped", reason=str(exc))
        else:
            now = time.time()
            until = min(event.until, now + self.config.host_cooldown)  # no worker disables a host for longer
            self.store.disable_host(event.host, until, event.reason, now)
            self.log.info("host disabled", host=event.host, until=until, by=event.worker, reason=event.reason)
        channel.basic_ack(method.delivery_tag)

    def check_fleet(self) -> None:
        for worker in self.store.mark_lost(time.time(), self.config.worker_lost_after):
            self.log.warning("worker lost, its proxies return to the pool", worker=worker)

    def run(self, stop) -> None:
        """Serve until ``stop`` is set, reconnecting whenever the broker goes away."""
        def session(connection) -> None:
            channel = amqp.open_channel(connection, self.config, prefetch=100)
            for queue, handler in ((amqp.CONTROL_QUEUE, self.on_request), (amqp.HEARTBEAT_QUEUE, self.on_heartbeat),
                                   (amqp.HOST_EVENTS_CONTROLLER, self.on_host_event)):
                channel.basic_consume(queue, amqp.rejecting_failures(handler, self.log, queue))
            self.log.info("serving", queues=[amqp.CONTROL_QUEUE, amqp.HEARTBEAT_QUEUE, amqp.HOST_EVENTS_CONTROLLER])
            last_check = 0.0
            while not stop.is_set():
                connection.process_data_events(time_limit=1.0)
                if time.monotonic() - last_check >= 1.0:
                    self.check_fleet()
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

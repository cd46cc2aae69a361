"""A worker's control plane: proxy leases (and the refusals that decide host cooldowns) and heartbeats.

These are rare, small request/replies and announcements, so they share one blocking
connection, separate from the job stream (:mod:`monitor.async_amqp`), used by one thread
at a time (pika connections are not thread-safe). The heartbeat thread's beat every few
seconds also keeps that connection's own AMQP heartbeats flowing. A lost connection is
opened again on the next call.
"""
from __future__ import annotations

import threading

from monitor import amqp
from monitor.config import Config
from monitor.log import EventLogger
from monitor.messages import Heartbeat, LeaseReply, LeaseRequest

# What a control call raises when the controller or the broker cannot answer now.
UNAVAILABLE = (amqp.RpcTimeout, amqp.BrokerUnavailable, amqp.PublishFailed, *amqp.RECOVERABLE)


class ControlLink:
    def __init__(self, config: Config, worker: str, run: str, log: EventLogger) -> None:
        self.config = config
        self.worker = worker
        self.run = run  # this process's pid and start time: the controller tells runs of one name apart
        self.log = log
        self.lock = threading.Lock()
        self.connection = None
        self.rpc: amqp.RpcClient | None = None

    def _connected(self) -> amqp.RpcClient:
        """The RPC client, connecting first if needed (one attempt: callers decide to retry)."""
        if self.connection is None or not self.connection.is_open:
            self.connection = amqp.connect(self.config, self.log, attempts=1)
            self.rpc = amqp.RpcClient(self.connection)
            self.rpc.channel.confirm_delivery()
        return self.rpc

    def _guarded(self, action):
        """Run ``action(rpc)`` under the lock; drop the connection on a broker error and re-raise."""
        with self.lock:
            try:
                return action(self._connected())
            except amqp.RECOVERABLE:
                self.connection = None
                raise

    def lease(self, count: int, exclude: list[int], host: str | None = None, refused: list[int] | None = None,
              broken: list[int] | None = None, attempts: int = 3) -> LeaseReply:
        """Ask the master for exits (see :class:`monitor.messages.LeaseRequest`); a master
        restarting takes a moment, so ask a few times (a requeued job would use up one of
        its deliveries)."""
        request = LeaseRequest("lease", self.worker, self.run, count, exclude, host, refused or [],
                               broken or []).to_bytes()
        for attempt in range(1, attempts + 1):
            try:
                body = self._guarded(lambda rpc: rpc.call(amqp.CONTROL_QUEUE, request))
                break
            except amqp.RpcTimeout:
                if attempt == attempts:
                    raise
        reply = LeaseReply.from_bytes(body)
        self.log.info("proxies leased", granted=len(reply.proxies), pool_size=reply.pool_size, host=host)
        return reply

    def release(self, proxy_ids: list[int] | None = None) -> None:
        """Give leased proxies back (all of them when None: on a clean stop); the master
        also takes them back when the heartbeats stop or a new run of this worker starts."""
        request = LeaseRequest("release", self.worker, self.run, proxies=proxy_ids or []).to_bytes()
        try:
            self._guarded(lambda rpc: rpc.call(amqp.CONTROL_QUEUE, request, timeout=2.0))
        except UNAVAILABLE:
            pass

    def beat(self, heartbeat: Heartbeat) -> None:
        """Publish a heartbeat (not confirmed: the next one follows in a few seconds)."""
        def send(rpc: amqp.RpcClient) -> None:
            rpc.channel.basic_publish("", amqp.HEARTBEAT_QUEUE, heartbeat.to_bytes())
            self.connection.process_data_events(0)
        self._guarded(send)

    def close(self) -> None:
        with self.lock:
            if self.connection is not None and self.connection.is_open:
                try:
                    self.connection.close()
                except amqp.RECOVERABLE:
                    pass
            self.connection = None

"""AMQP topology and connection handling: the one module that knows queue names and arguments.

Topology (declared idempotently by every process at connect):

* ``job_queue`` and ``task_queue``: durable quorum queues with a delivery limit; a message
  rejected, or redelivered more often than the limit, goes to ``dead_letter``.
* ``dead_letter``: durable quorum queue, inspected and replayed with ``monitor dlq``.
* ``control``: request/reply (direct reply-to) from workers to the controller: proxy leases
  (expire after 30 s unread).
* ``heartbeats``: worker heartbeats to the controller (expire after a minute unread).
  Both are served through :func:`rejecting_failures`: a message that fails, or that was in
  hand when the controller died, is dropped (its sender repeats it), never retried forever.
* ``host_events``: fanout exchange; the controller announces a host cooldown to every
  worker (each binds its own exclusive queue).
* ``monitor.home``: an empty queue that marks which home's controller owns this vhost
  (see :func:`claim_home`): two homes on one vhost would consume each other's messages.

Every publish is persistent, mandatory and confirmed by the broker. Consumers ack manually.
"""
from __future__ import annotations

import signal
import threading
import time
import uuid
from typing import Callable

import pika
import pika.exceptions

from monitor.config import Config, ConfigError
from monitor.homekey import HomeKey
from monitor.log import EventLogger, describe
from monitor.urls import redact, scrub_credentials

JOB_QUEUE = "job_queue"
TASK_QUEUE = "task_queue"
DEAD_LETTER = "dead_letter"
CONTROL_QUEUE = "control"
HEARTBEAT_QUEUE = "heartbeats"
HOST_EVENTS = "host_events"
HOME_QUEUE = "monitor.home"
REPLY_TO = "amq.rabbitmq.reply-to"

# Errors after which the right move is to drop the connection and connect again.
RECOVERABLE = (
    pika.exceptions.AMQPConnectionError,
    pika.exceptions.AMQPChannelError,
    pika.exceptions.StreamLostError,
    ConnectionError,
)


class BrokerUnavailable(RuntimeError):
    """The broker could not be reached within the allowed attempts."""


class PublishFailed(RuntimeError):
    """The broker refused (nacked) or could not route a message."""


class RpcTimeout(RuntimeError):
    """No reply arrived in time (the controller is down or busy)."""


class HomeConflict(ConfigError):
    """The broker's vhost belongs to another home: running on would mix two stacks' messages."""


def claim_home(channel: pika.adapters.blocking_connection.BlockingChannel, config: Config) -> None:
    """Mark the vhost as this home's, or raise :class:`HomeConflict` if another home has.

    The mark is the dead-letter routing key of the (always empty) ``monitor.home`` queue,
    set to the home's public id: RabbitMQ refuses to declare a queue again with other
    arguments, so the broker itself keeps a second home off the vhost, atomically. The
    channel is closed by the broker on a conflict. Workers do not claim (a fleet's workers
    run on other machines, with homes of their own).
    """
    home_id = HomeKey.load(config.home).home_id
    try:
        channel.queue_declare(HOME_QUEUE, durable=True, arguments={
            "x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"home:{home_id}"})
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != 406:
            raise
        owner = exc.reply_text.rpartition("current is 'home:")[2].rstrip("'")
        raise HomeConflict(
            f"the broker's vhost at {redact(config.broker_url)} belongs to another monitor home (id {owner}, this "
            f"home is {home_id}): give each home its own vhost in AMQP_URL, or, if that home is gone for good, "
            f"delete the queue {HOME_QUEUE} on that vhost (its queues hold that home's jobs)") from None


def declare_topology(channel: pika.adapters.blocking_connection.BlockingChannel, config: Config) -> None:
    """Declare every queue and exchange listed in this module's docstring (a no-op when they exist)."""
    channel.queue_declare(DEAD_LETTER, durable=True, arguments={"x-queue-type": "quorum"})
    for queue in (JOB_QUEUE, TASK_QUEUE):
        channel.queue_declare(queue, durable=True, arguments={
            "x-queue-type": "quorum",
            "x-delivery-limit": config.delivery_limit,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": DEAD_LETTER,
        })
    channel.queue_declare(CONTROL_QUEUE, durable=True, arguments={"x-message-ttl": 30_000})
    channel.queue_declare(HEARTBEAT_QUEUE, durable=True, arguments={"x-message-ttl": 60_000, "x-max-length": 100_000})
    channel.exchange_declare(HOST_EVENTS, exchange_type="fanout", durable=True)
    # Workers used to announce cooldowns to the controller through this queue; the controller
    # decides them now, and the queue would only fill up (deleting a missing queue is a no-op).
    channel.queue_delete("host_events.controller")


_STARTED = time.monotonic()  # when this process started (near enough: when it imported this module)


class Backoff:
    """The waits between attempts to reach the broker: 0.5 s doubling to 15 s, except in a
    process's first minute, when they stay at most 1 s: a node started together with the
    stack accepts connections 5 to 10 s after it, and a wait that had doubled to 8 or 16 s
    by then delayed the stack's first check by as much."""

    FIRST, LONGEST, EARLY_LONGEST, EARLY = 0.5, 15.0, 1.0, 60.0

    def __init__(self) -> None:
        self.delay = self.FIRST

    def next(self) -> float:
        """The wait before the next attempt."""
        delay, self.delay = self.delay, min(self.delay * 2, self.LONGEST)
        return min(delay, self.EARLY_LONGEST) if time.monotonic() - _STARTED < self.EARLY else delay

    def reset(self) -> None:
        self.delay = self.FIRST


def connect(config: Config, log: EventLogger, attempts: int | None = None,
            stop: threading.Event | None = None) -> pika.BlockingConnection:
    """Connect to the broker, retrying with capped exponential backoff (:class:`Backoff`).

    ``attempts=None`` retries until ``stop`` is set (long-running processes); the CLI passes a
    small number and gets :class:`BrokerUnavailable` with a one-line reason.
    """
    params = pika.URLParameters(config.broker_url)
    params.heartbeat = 60
    params.blocked_connection_timeout = 60
    params.connection_attempts = 1
    params.socket_timeout = 5
    backoff = Backoff()
    attempt = 0
    while True:
        attempt += 1
        try:
            connection = pika.BlockingConnection(params)
            if attempt > 1:
                log.info("broker connected", broker=redact(config.broker_url), attempts=attempt)
            return connection
        except pika.exceptions.AMQPError as exc:
            reason = scrub_credentials(f"cannot reach the broker at {redact(config.broker_url)}: {type(exc).__name__} {exc}".strip())
            if attempts is not None and attempt >= attempts:
                raise BrokerUnavailable(reason) from None
            if attempt == 1 or attempt % 10 == 0:
                log.warning("broker unavailable, retrying", reason=reason, attempt=attempt)
            delay = backoff.next()
            if stop is not None and stop.wait(delay):
                raise BrokerUnavailable("stopped while waiting for the broker") from None
            if stop is None:
                time.sleep(delay)


def open_channel(connection: pika.BlockingConnection, config: Config, prefetch: int = 0):
    """A channel with the vhost claimed for this home, publisher confirms on, the topology
    declared and the prefetch set."""
    channel = connection.channel()
    claim_home(channel, config)
    channel.confirm_delivery()
    declare_topology(channel, config)
    if prefetch:
        channel.basic_qos(prefetch_count=prefetch)
    return channel


def check_topology(channel: pika.adapters.blocking_connection.BlockingChannel) -> None:
    """Check that the queues and the exchange a worker uses exist (passive declares, which
    need no permission: a fleet's workers may use a broker user that cannot configure
    queues). Raises a RECOVERABLE channel error until the controller has declared them."""
    for queue in (JOB_QUEUE, TASK_QUEUE, CONTROL_QUEUE, HEARTBEAT_QUEUE):
        channel.queue_declare(queue, passive=True)
    channel.exchange_declare(HOST_EVENTS, passive=True)


def declare_with_blocking_client(config: Config, log: EventLogger, owner: bool = True) -> None:
    """Over a short-lived connection (one attempt; raises BrokerUnavailable or a RECOVERABLE
    error), for clients that are not blocking ones: the home's own processes (``owner``)
    claim the vhost (:class:`HomeConflict`) and declare the topology; workers only check it."""
    connection = connect(config, log, attempts=1)
    try:
        channel = connection.channel()
        if owner:
            claim_home(channel, config)
            declare_topology(channel, config)
        else:
            check_topology(channel)
    finally:
        if connection.is_open:
            connection.close()


def publish(channel, queue: str, body: bytes, message_id: str | None = None, exchange: str = "",
            headers: dict[str, str] | None = None) -> None:
    """Publish a persistent message and wait for the broker's confirm; raise PublishFailed otherwise.

    Each message gets an id (kept when replayed from ``dead_letter``) so it can be named.
    """
    try:
        channel.basic_publish(
            exchange=exchange, routing_key=queue, body=body, mandatory=True,
            properties=pika.BasicProperties(delivery_mode=2, content_type="application/json",
                                            message_id=message_id or uuid.uuid4().hex, headers=headers),
        )
    except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as exc:
        raise PublishFailed(f"broker did not accept the message for {queue}: {type(exc).__name__}") from None


class RpcClient:
    """Request/reply over RabbitMQ's direct reply-to, on a channel of its own."""

    def __init__(self, connection: pika.BlockingConnection) -> None:
        self.connection = connection
        self.channel = connection.channel()
        self.replies: dict[str, bytes] = {}
        self.channel.basic_consume(REPLY_TO, self._on_reply, auto_ack=True)

    def _on_reply(self, channel, method, properties, body: bytes) -> None:
        self.replies[properties.correlation_id] = body

    def call(self, queue: str, body: bytes, timeout: float = 5.0) -> bytes:
        """Send ``body`` to ``queue`` and wait for its reply; raise RpcTimeout after ``timeout``."""
        correlation_id = uuid.uuid4().hex
        self.channel.basic_publish("", queue, body, pika.BasicProperties(
            reply_to=REPLY_TO, correlation_id=correlation_id, expiration=str(int(timeout * 1000))))
        deadline = time.monotonic() + timeout
        while correlation_id not in self.replies:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RpcTimeout(f"no reply from {queue} within {timeout:g}s")
            self.connection.process_data_events(time_limit=min(remaining, 0.2))
        return self.replies.pop(correlation_id)


def reply(channel, properties, body: bytes) -> None:
    """Answer a request received with ``reply_to`` and ``correlation_id``."""
    channel.basic_publish("", properties.reply_to, body, pika.BasicProperties(correlation_id=properties.correlation_id))


def rejecting_failures(handler: Callable, log: EventLogger, queue: str) -> Callable:
    """Wrap the consumer callback of a control-plane queue (lease requests, heartbeats:
    messages their senders repeat) so that no message can stop the consumer for good:

    * a message whose handling fails (a bad message the schema let through, a value a store
      refuses) is logged and rejected, to ``dead_letter`` where the queue has one;
    * a message delivered again (the consumer's last run ended while it was in hand: it may
      be the very message that killed it) is logged and dropped unhandled: its sender sends
      a fresh one anyway, and these queues' messages expire soon, so dead-lettering them
      would only bury the dead letters that matter. This is these queues' delivery limit.

    Broker errors still propagate: the connection is opened again."""
    def on_message(channel, method, properties, body: bytes) -> None:
        if method.redelivered:
            log.warning("redelivered message dropped: its sender repeats it", queue=queue,
                        body=body[:200].decode("utf-8", "replace"))
            channel.basic_reject(method.delivery_tag, requeue=False)
            return
        try:
            handler(channel, method, properties, body)
        except (PublishFailed, *RECOVERABLE):
            raise
        except Exception as exc:
            log.error("message rejected: handling it failed", queue=queue,
                      reason=describe(exc), body=body[:200].decode("utf-8", "replace"))
            channel.basic_reject(method.delivery_tag, requeue=False)
    return on_message


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so loops finish the message in hand and exit cleanly."""
    stop = threading.Event()

    def _handler(signum, frame):  # noqa: ARG001 - signal handler signature
        stop.set()

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return stop


def reconnecting(config: Config, log: EventLogger, stop: threading.Event,
                 session: Callable[[pika.BlockingConnection], None]) -> None:
    """Run ``session(connection)`` until ``stop`` is set, connecting again (with backoff)
    whenever the broker goes away: connection reset, node restart, channel closed."""
    while not stop.is_set():
        connection = None
        try:
            connection = connect(config, log, stop=stop)
            session(connection)
        except BrokerUnavailable:
            return
        except HomeConflict as exc:
            log.error("refusing to run", reason=str(exc))
            raise SystemExit(2) from None
        except (PublishFailed, *RECOVERABLE) as exc:
            log.warning("broker connection lost, reconnecting", reason=describe(exc))
            stop.wait(1.0)
        finally:
            if connection is not None and connection.is_open:
                try:
                    connection.close()
                except RECOVERABLE:
                    pass
    log.info("stopped")

"""AMQP topology and connection handling: the one module that knows queue names and arguments.

Topology (declared idempotently by every process at connect):

* ``job_queue`` and ``task_queue``: durable quorum queues with a delivery limit; a message
  rejected, or redelivered more often than the limit, goes to ``dead_letter``.
* ``dead_letter``: durable quorum queue, inspected and replayed with ``monitor dlq``.

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

from monitor.config import Config
from monitor.log import EventLogger
from monitor.messages import InvalidMessage
from monitor.urls import redact

JOB_QUEUE = "job_queue"
TASK_QUEUE = "task_queue"
DEAD_LETTER = "dead_letter"

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


def declare_topology(channel: pika.adapters.blocking_connection.BlockingChannel, config: Config) -> None:
    """Declare the dead-letter queue and the two work queues (a no-op when they exist)."""
    channel.queue_declare(DEAD_LETTER, durable=True, arguments={"x-queue-type": "quorum"})
    for queue in (JOB_QUEUE, TASK_QUEUE):
        channel.queue_declare(queue, durable=True, arguments={
            "x-queue-type": "quorum",
            "x-delivery-limit": config.delivery_limit,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": DEAD_LETTER,
        })


def connect(config: Config, log: EventLogger, attempts: int | None = None,
            stop: threading.Event | None = None) -> pika.BlockingConnection:
    """Connect to the broker, retrying with capped exponential backoff (0.5 s doubling to 15 s).

    ``attempts=None`` retries until ``stop`` is set (long-running processes); the CLI passes a
    small number and gets :class:`BrokerUnavailable` with a one-line reason.
    """
    params = pika.URLParameters(config.broker_url)
    params.heartbeat = 60
    params.blocked_connection_timeout = 60
    params.connection_attempts = 1
    params.socket_timeout = 5
    delay = 0.5
    attempt = 0
    while True:
        attempt += 1
        try:
            connection = pika.BlockingConnection(params)
            if attempt > 1:
                log.info("broker connected", broker=redact(config.broker_url), attempts=attempt)
            return connection
        except pika.exceptions.AMQPError as exc:
            reason = f"cannot reach the broker at {redact(config.broker_url)}: {type(exc).__name__} {exc}".strip()
            if attempts is not None and attempt >= attempts:
                raise BrokerUnavailable(reason) from None
            if attempt == 1 or attempt % 10 == 0:
                log.warning("broker unavailable, retrying", reason=reason, attempt=attempt)
            if stop is not None and stop.wait(delay):
                raise BrokerUnavailable("stopped while waiting for the broker") from None
            if stop is None:
                time.sleep(delay)
            delay = min(delay * 2, 15.0)


def open_channel(connection: pika.BlockingConnection, config: Config, prefetch: int = 0):
    """A channel with publisher confirms on, the topology declared and the prefetch set."""
    channel = connection.channel()
    channel.confirm_delivery()
    declare_topology(channel, config)
    if prefetch:
        channel.basic_qos(prefetch_count=prefetch)
    return channel


def publish(channel, queue: str, body: bytes, message_id: str | None = None) -> None:
    """Publish a persistent message and wait for the broker's confirm; raise PublishFailed otherwise.

    Each message gets an id (kept when replayed from ``dead_letter``) so it can be named.
    """
    try:
        channel.basic_publish(
            exchange="", routing_key=queue, body=body, mandatory=True,
            properties=pika.BasicProperties(delivery_mode=2, content_type="application/json",
                                            message_id=message_id or uuid.uuid4().hex),
        )
    except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as exc:
        raise PublishFailed(f"broker did not accept the message for {queue}: {type(exc).__name__}") from None


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so loops finish the message in hand and exit cleanly."""
    stop = threading.Event()

    def _handler(signum, frame):  # noqa: ARG001 - signal handler signature
        stop.set()

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return stop


def run_consumer(config: Config, queue: str, prefetch: int, schema, handle: Callable[[object, object, object], None],
                 log: EventLogger, stop: threading.Event) -> None:
    """Consume ``queue`` until ``stop`` is set, reconnecting whenever the broker goes away.

    Each body is decoded with ``schema.from_bytes``; one that fails validation is rejected to
    ``dead_letter`` with a logged reason. ``handle(channel, method, message)`` must ack (or
    nack) the message itself, after its output is confirmed or committed. Messages unacked
    when the connection is lost or the loop stops are requeued by the broker.
    """
    while not stop.is_set():
        connection = None
        try:
            connection = connect(config, log, stop=stop)
            channel = open_channel(connection, config, prefetch)
            log.info("consuming", queue=queue, prefetch=prefetch)
            for method, _properties, body in channel.consume(queue, inactivity_timeout=1.0):
                if stop.is_set():
                    break
                if method is None:
                    continue
                try:
                    message = schema.from_bytes(body)
                except InvalidMessage as exc:
                    log.warning("message rejected to dead_letter", queue=queue, reason=str(exc))
                    channel.basic_reject(method.delivery_tag, requeue=False)
                    continue
                handle(channel, method, message)
            channel.cancel()
        except BrokerUnavailable:
            return
        except (PublishFailed, *RECOVERABLE) as exc:
            log.warning("broker connection lost, reconnecting", reason=f"{type(exc).__name__}: {exc}"[:300])
            stop.wait(1.0)
        finally:
            if connection is not None and connection.is_open:
                try:
                    connection.close()
                except RECOVERABLE:
                    pass
    log.info("stopped", queue=queue)

"""One AMQP connection driven by an I/O thread of its own: consume with a prefetch window,
publish with windowed confirms, ack from any thread.

The blocking client (:mod:`monitor.amqp`) waits for each publisher confirm, one round trip
(and one broker disk sync) per message, and cannot overlap work. This client keeps a
``pika.SelectConnection`` running in a background thread:

* ``publish(...)`` may be called from any thread; the message goes out at once and
  ``on_confirm(True)`` runs (in the I/O thread) when the broker confirms it, or
  ``on_confirm(False)`` when the broker nacks or returns it or the connection drops first
  (at once, in the caller's thread, when there is no connection to send it on).
  Any number of publishes may await their confirms together: the broker confirms them in
  batches (``multiple``), so throughput is bounded by bandwidth, not by round trips.
* ``consume=(queue, prefetch, on_delivery)``: ``on_delivery(delivery)`` runs in the I/O
  thread for each message; it must hand heavy work to other threads and must not block.
  ``ack``/``nack`` take the :class:`Delivery` and are safe from any thread.
* ``subscribe=[(exchange, on_event)]``: a private queue bound to each fanout ``exchange``,
  declared again at every connect; ``on_event(body)`` runs in the I/O thread.
* Every (re)connection starts a new *generation*. A delivery of an earlier generation can
  no longer be acked (the broker has already requeued it), so acks and nacks for it are
  dropped, as are publishes tied to it: its job will be delivered again.

Topology is declared (or, by workers, checked) through the blocking client at each connect
(:func:`amqp.declare_topology` stays the one place that knows queue arguments). The connection reconnects with capped
exponential backoff until :meth:`stop`.
"""
from __future__ import annotations

import threading
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Callable

import pika
import pika.exceptions

from monitor import amqp
from monitor.config import Config
from monitor.log import EventLogger
from monitor.urls import redact, scrub_credentials

Confirm = Callable[[bool], None]


@dataclass(frozen=True)
class Delivery:
    """A message received from the broker, with what it takes to ack it later."""
    body: bytes
    delivery_tag: int
    redelivered: bool
    generation: int


class AsyncClient:
    def __init__(self, config: Config, log: EventLogger,
                 consume: tuple[str, int, Callable[[Delivery], None]] | None = None,
                 subscribe: list[tuple[str, Callable[[bytes], None]]] = (), owner: bool = True) -> None:
        self.config = config
        self.log = log
        self.consume = consume
        self.subscribe = subscribe
        # The home's own processes claim the vhost and declare the topology; workers (which may
        # run elsewhere, as a broker user that cannot configure queues) only check it exists.
        self.owner = owner
        self.conflict: amqp.HomeConflict | None = None  # set when another home owns the vhost: give up
        self.generation = 0
        self.ready = threading.Event()  # set while a channel is open
        self._connection: pika.SelectConnection | None = None
        self._channel = None
        self._consumer_tag: str | None = None
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        # Publishes awaiting their confirm, by the channel's publish sequence number.
        self._unconfirmed: dict[int, Confirm] = {}
        self._returned: set[int] = set()
        self._channel_id = ""  # prefix of the message ids published on the current channel
        self._sequence = 0
        self._backoff = amqp.Backoff()
        self._calls: deque[Callable[[], object]] = deque()  # for the I/O thread, see _call
        self._calls_lock = threading.Lock()
        self._wake_pending = False
        self._thread = threading.Thread(target=self._run, name="amqp-io", daemon=True)

    # --- life cycle ------------------------------------------------------------------------
    def start(self) -> "AsyncClient":
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Close the connection (unacked deliveries go back to the queue) and end the thread."""
        self._stopping.set()
        self._call(self._close)
        self._stopped.wait(timeout)

    def cancel_consumer(self) -> None:
        """Stop receiving new deliveries (those in hand can still be acked)."""
        self._call(lambda: self._channel is not None and self._consumer_tag and
                   self._channel.basic_cancel(self._consumer_tag))

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                amqp.declare_with_blocking_client(self.config, self.log, self.owner)
            except amqp.HomeConflict as exc:
                self.log.error("refusing to run", reason=str(exc))
                self.conflict = exc
                break
            except (amqp.BrokerUnavailable, *amqp.RECOVERABLE) as exc:
                self._wait_before_retry(exc)
                continue
            params = pika.URLParameters(self.config.broker_url)
            params.heartbeat = 60
            params.blocked_connection_timeout = 60
            self._connection = pika.SelectConnection(
                params, on_open_callback=self._on_open, on_open_error_callback=self._on_open_error,
                on_close_callback=self._on_closed)
            self._connection.ioloop.start()
            self._connection = None
        self._stopped.set()

    def _wait_before_retry(self, exc: BaseException) -> None:
        reason = scrub_credentials(f"{type(exc).__name__}: {exc}")[:300]
        delay = self._backoff.next()
        self.log.warning("broker unavailable, retrying", broker=redact(self.config.broker_url), reason=reason,
                         retry_in_s=delay)
        self._stopping.wait(delay)

    def _on_open_error(self, connection, exc: BaseException) -> None:
        connection.ioloop.stop()
        if not self._stopping.is_set():
            self._wait_before_retry(exc)

    def _on_open(self, connection) -> None:
        connection.channel(on_open_callback=self._on_channel_open)

    def _on_channel_open(self, channel) -> None:
        self._channel = channel
        self._channel_id = uuid.uuid4().hex
        self._sequence = 0
        channel.add_on_close_callback(self._on_channel_closed)
        channel.add_on_return_callback(self._on_return)
        channel.confirm_delivery(ack_nack_callback=self._on_confirm, callback=self._on_confirm_mode)

    def _on_confirm_mode(self, _frame) -> None:
        for exchange, on_event in self.subscribe:
            self._subscribe(exchange, on_event)
        if self.consume is None:
            self._became_ready()
            return
        queue, prefetch, _ = self.consume
        self._channel.basic_qos(prefetch_count=prefetch, callback=lambda _frame: self._start_consuming(queue))

    def _subscribe(self, exchange: str, on_event: Callable[[bytes], None]) -> None:
        channel = self._channel

        def consume(frame) -> None:
            channel.basic_consume(frame.method.queue, lambda _ch, _method, _props, body: on_event(body), auto_ack=True)

        def bind(frame) -> None:
            channel.queue_bind(frame.method.queue, exchange, callback=lambda _frame: consume(frame))

        channel.queue_declare("", exclusive=True, auto_delete=True, callback=bind)

    def _start_consuming(self, queue: str) -> None:
        self._consumer_tag = self._channel.basic_consume(queue, self._on_message)
        self._became_ready()

    def _became_ready(self) -> None:
        self.generation += 1
        self._backoff.reset()
        self.ready.set()
        self.log.info("broker connected", broker=redact(self.config.broker_url), generation=self.generation)
        self._run_calls()  # calls queued while the previous connection went away

    def _on_channel_closed(self, channel, reason: BaseException) -> None:
        self._lost(f"channel closed: {reason}")
        if self._connection is not None and self._connection.is_open:
            self._connection.close()

    def _on_closed(self, connection, reason: BaseException) -> None:
        self._lost(f"connection closed: {reason}")
        connection.ioloop.stop()
        if not self._stopping.is_set():
            self._wait_before_retry(reason)

    def _lost(self, reason: str) -> None:
        """Every publish still awaiting a confirm has failed; deliveries in hand are stale."""
        if self._channel is None:
            return
        self.ready.clear()
        self._channel = None
        self._consumer_tag = None
        pending, self._unconfirmed = self._unconfirmed, {}
        self._returned.clear()
        self.generation += 1
        if not self._stopping.is_set():
            self.log.warning("broker connection lost, reconnecting", reason=scrub_credentials(reason)[:300],
                             unconfirmed=len(pending))
        for on_confirm in pending.values():
            on_confirm(False)

    def _close(self) -> None:
        if self._connection is not None and self._connection.is_open:
            self._connection.close()
        elif self._connection is not None:
            self._connection.ioloop.stop()

    # --- thread-safe operations ---------------------------------------------------------------
    def _call(self, callback: Callable[[], object]) -> bool:
        """Run ``callback`` in the I/O thread; False when it cannot be (no connection).

        Callbacks queue up and one wake-up of the I/O loop runs them all: waking the loop is
        a system call, and a busy worker asks for two (a publish, an ack) per job."""
        if threading.current_thread() is self._thread:
            callback()
            return True
        connection = self._connection
        if connection is None:
            return False
        self._calls.append(callback)
        with self._calls_lock:
            if self._wake_pending:
                return True
            self._wake_pending = True
        try:
            connection.ioloop.add_callback_threadsafe(self._run_calls)
        except (RuntimeError, OSError, AttributeError):
            pass  # the loop closed under us: the calls run once the next connection is ready
        return True

    def _run_calls(self) -> None:
        with self._calls_lock:
            self._wake_pending = False
        while self._calls:
            self._calls.popleft()()

    def publish(self, queue: str, body: bytes, on_confirm: Confirm, exchange: str = "",
                delivery: Delivery | None = None) -> None:
        """Publish a persistent, mandatory message; ``on_confirm(ok)`` runs in the I/O thread.

        With ``delivery``, the message is the outcome of that delivery: it is dropped (and
        ``on_confirm(False)`` called) if the delivery belongs to an earlier connection.
        """
        def send() -> None:
            if self._channel is None or (delivery is not None and delivery.generation != self.generation):
                on_confirm(False)
                return
            self._sequence += 1
            self._unconfirmed[self._sequence] = on_confirm
            self._channel.basic_publish(exchange, queue, body, mandatory=True, properties=pika.BasicProperties(
                delivery_mode=2, content_type="application/json", message_id=f"{self._channel_id}-{self._sequence}"))
        if not self._call(send):
            on_confirm(False)

    def ready_count(self, queue: str, timeout: float = 5.0) -> int | None:
        """Messages ready in ``queue`` (a passive declare), or None without an answer in time."""
        answer: list[int] = []
        answered = threading.Event()

        def declared(frame) -> None:
            answer.append(frame.method.message_count)
            answered.set()

        self._call(lambda: self._channel is not None and self._channel.queue_declare(queue, passive=True,
                                                                                     callback=declared))
        return answer[0] if answered.wait(timeout) else None

    def ack(self, delivery: Delivery) -> None:
        self._call(lambda: self._settle(delivery, requeue=None))

    def nack(self, delivery: Delivery, requeue: bool = True) -> None:
        """Give a delivery back (``requeue``) or reject it to the dead-letter queue."""
        self._call(lambda: self._settle(delivery, requeue=requeue))

    def _settle(self, delivery: Delivery, requeue: bool | None) -> None:
        if self._channel is None or delivery.generation != self.generation:
            return  # the broker requeued it when the old connection closed
        if requeue is None:
            self._channel.basic_ack(delivery.delivery_tag)
        else:
            self._channel.basic_nack(delivery.delivery_tag, requeue=requeue)

    # --- I/O-thread callbacks -----------------------------------------------------------------
    def _on_message(self, channel, method, properties, body: bytes) -> None:
        self.consume[2](Delivery(body, method.delivery_tag, method.redelivered, self.generation))

    def _on_return(self, channel, method, properties, body: bytes) -> None:
        # The broker returns an unroutable message before it confirms it.
        prefix, _, sequence = (properties.message_id or "").rpartition("-")
        if prefix == self._channel_id and sequence.isdigit():
            self._returned.add(int(sequence))

    def _on_confirm(self, frame) -> None:
        method = frame.method
        ok = isinstance(method, pika.spec.Basic.Ack)
        if method.multiple:  # every sequence number up to this one; the dict is in publish order
            tags = []
            for tag in self._unconfirmed:
                if tag > method.delivery_tag:
                    break
                tags.append(tag)
        else:
            tags = [method.delivery_tag]
        for tag in tags:
            on_confirm = self._unconfirmed.pop(tag, None)
            if on_confirm is not None:
                on_confirm(ok and tag not in self._returned)
            self._returned.discard(tag)

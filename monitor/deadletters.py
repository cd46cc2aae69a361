"""The dead-letter queue: list, replay and purge what the pipeline refused (``monitor dlq``).

A message lands in ``dead_letter`` when a consumer rejects it (it failed validation) or when
it was delivered more often than the queue's delivery limit (it kept crashing consumers).
RabbitMQ records where it came from and why in the ``x-first-death-*`` headers.

Browsing uses ``basic.get`` without acking; closing the channel returns every message not
acked to the queue, so listing never loses anything.
"""
from __future__ import annotations

from dataclasses import dataclass

import pika

from monitor import amqp
from monitor.config import Config
from monitor.log import get_logger
from monitor.urls import scrub_credentials

BROWSE_LIMIT = 10_000


@dataclass(frozen=True)
class DeadLetter:
    id: str
    queue: str
    reason: str
    body: bytes
    delivery_tag: int
    properties: pika.BasicProperties

    @property
    def text(self) -> str:
        """The body as it may be shown: a job carries its watch's URL as stored, password
        and all (the worker needs it), so every ``//user:password@`` is masked."""
        return scrub_credentials(self.body.decode("utf-8", errors="replace"))

    def preview(self, width: int = 80) -> str:
        text = self.text.replace("\n", " ")
        return text if len(text) <= width else text[: width - 3] + "..."


def _header(properties: pika.BasicProperties, name: str, default: str = "?") -> str:
    value = (properties.headers or {}).get(name, default)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _browse(channel, limit: int) -> list[DeadLetter]:
    letters = []
    for _ in range(limit):
        method, properties, body = channel.basic_get(amqp.DEAD_LETTER, auto_ack=False)
        if method is None:
            break
        letters.append(DeadLetter(
            id=properties.message_id or f"tag-{method.delivery_tag}",
            queue=_header(properties, "x-first-death-queue"),
            reason=_header(properties, "x-first-death-reason"),
            body=body, delivery_tag=method.delivery_tag, properties=properties,
        ))
    return letters


def trim(channel, keep: int) -> int:
    """Drop the oldest dead letters beyond ``keep``; return how many went. (A queue length
    limit set by queue argument cannot be added to an existing queue; this works on any
    broker.)"""
    excess = channel.queue_declare(amqp.DEAD_LETTER, passive=True).method.message_count - keep
    dropped = 0
    while dropped < excess:
        method, _properties, _body = channel.basic_get(amqp.DEAD_LETTER, auto_ack=True)
        if method is None:
            break
        dropped += 1
    return dropped


class DeadLetterQueue:
    """A short-lived connection to the broker for ``monitor dlq`` commands."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.connection = amqp.connect(config, get_logger("cli"), attempts=3)
        self.channel = amqp.open_channel(self.connection, config)

    def close(self) -> None:
        if self.connection.is_open:
            self.connection.close()  # returns every unacked message to the queue

    def __enter__(self) -> "DeadLetterQueue":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def list(self, limit: int = BROWSE_LIMIT) -> list[DeadLetter]:
        """The dead letters, oldest first (nothing is removed)."""
        return _browse(self.channel, limit)

    def replay(self, ids: set[str] | None) -> list[DeadLetter]:
        """Publish the chosen dead letters (``None``: all) back to the queue they died in,
        each confirmed before it is removed from ``dead_letter``; return those replayed."""
        replayed = []
        for letter in _browse(self.channel, BROWSE_LIMIT):
            if ids is not None and letter.id not in ids:
                continue
            if letter.queue not in (amqp.JOB_QUEUE, amqp.TASK_QUEUE):
                continue  # not ours to route; it stays for a human to look at
            amqp.publish(self.channel, letter.queue, letter.body, message_id=letter.id)
            self.channel.basic_ack(letter.delivery_tag)
            replayed.append(letter)
        return replayed

    def purge(self) -> int:
        """Delete every dead letter; return how many there were."""
        return self.channel.queue_purge(amqp.DEAD_LETTER).method.message_count

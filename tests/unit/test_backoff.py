"""Waits between attempts to reach the broker (``monitor.amqp.Backoff``)."""
from __future__ import annotations

import time

import pytest

from monitor import amqp


def test_a_process_in_its_first_minute_retries_at_least_every_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node started with the stack is up 5 to 10 s later: connect within a second of it."""
    monkeypatch.setattr(amqp, "_STARTED", time.monotonic())
    backoff = amqp.Backoff()
    assert [backoff.next() for _ in range(8)] == [0.5] + [1.0] * 7


def test_later_the_waits_double_up_to_fifteen_seconds_and_start_over_once_connected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(amqp, "_STARTED", time.monotonic() - 3600)
    backoff = amqp.Backoff()
    assert [backoff.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0]
    backoff.reset()
    assert backoff.next() == 0.5

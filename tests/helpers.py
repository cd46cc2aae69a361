"""Helpers shared by the test suites."""
from __future__ import annotations

import time


def wait_for(predicate, timeout: float = 30.0, message: str = "condition", interval: float = 0.1):
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {message}")
        time.sleep(interval)

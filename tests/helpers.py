"""Helpers shared by the test suites."""
from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler


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


def send(handler: BaseHTTPRequestHandler, body: bytes, content_type: str = "text/html", status: int = 200,
         headers: dict | None = None) -> None:
    """Answer a request with ``body`` and the given status and headers."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)

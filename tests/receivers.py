"""Real receivers on loopback for alert delivery tests: a webhook endpoint that can fail
on purpose, and an SMTP server (aiosmtpd) that keeps what it is sent."""
from __future__ import annotations

import json
import threading
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller

from tests.fleet import free_port
from tests.helpers import send


class WebhookReceiver:
    """Accepts JSON POSTs on ``url``; answers 500 to the first ``fail_first`` requests and
    to every request while ``down`` is set. ``bodies`` keeps each accepted body with its
    headers."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.down = threading.Event()
        self.requests = 0
        self.accepted: list[tuple[dict, dict]] = []  # (headers, body)
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.requests += 1
                    refuse = receiver.requests <= receiver.fail_first or receiver.down.is_set()
                    if not refuse:
                        receiver.accepted.append(({k.lower(): v for k, v in self.headers.items()}, json.loads(body)))
                send(self, b"{}", "application/json", 500 if refuse else 200)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self) -> list[dict]:
        """Every alert accepted, in order, duplicates included."""
        with self.lock:
            return [alert for _, body in self.accepted for alert in body.get("alerts", [body])]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SmtpReceiver:
    """An SMTP server on loopback (no TLS, no login) keeping every message it receives."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        receiver = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd naming
                receiver.messages.append(message_from_bytes(envelope.content, policy=policy.default))
                return "250 OK"

        self.port = free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

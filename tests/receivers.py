"""Real receivers on loopback for alert delivery tests: a webhook endpoint that can fail
on purpose or close its port, and an SMTP server (aiosmtpd) that keeps what it is sent."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller

from tests.fleet import free_port
from tests.helpers import send


class WebhookReceiver:
    """Accepts JSON POSTs on ``url``; answers 500 to the first ``fail_first`` requests and
    to every request while ``down`` is set; refuses connections between :meth:`close` and
    :meth:`reopen`. ``accepted`` keeps each accepted body with its headers."""

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

        self.handler = Handler
        self.server = self._serve(0)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def _serve(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), self.handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def close(self) -> None:
        """Close the port: a sender's connection is refused, as by a host whose service is down."""
        self.stop()

    def reopen(self) -> None:
        """Listen on the same port again."""
        self.server = self._serve(self.server.server_address[1])

    def alerts(self) -> list[dict]:
        """Every alert accepted, in order, duplicates included."""
        with self.lock:
            return [alert for _, body in self.accepted for alert in body.get("alerts", [body])]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SmtpReceiver:
    """An SMTP server on loopback (no TLS, no login) keeping every message it receives and
    when (``arrived``). With ``stall``, it keeps a message but answers only once ``answer``
    is set: a sender stopped meanwhile cannot know the message arrived."""

    def __init__(self, stall: bool = False) -> None:
        self.messages: list[EmailMessage] = []
        self.arrived: list[float] = []
        self.answer = threading.Event()
        if not stall:
            self.answer.set()
        receiver = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd naming
                receiver.messages.append(message_from_bytes(envelope.content, policy=policy.default))
                receiver.arrived.append(time.time())
                await asyncio.get_running_loop().run_in_executor(None, receiver.answer.wait, 120)
                return "250 OK"

        self.port = free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        self.answer.set()
        self.controller.stop()

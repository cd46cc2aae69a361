"""Real proxy servers (Debian's tinyproxy) and an origin that rations each of them."""
from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.helpers import send, wait_for

PROXY_HEADER = "X-Proxy-Name"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


class TinyProxy:
    """A tinyproxy on loopback that marks every request it forwards with ``X-Proxy-Name: <name>``."""

    def __init__(self, name: str, directory: Path, credentials: tuple[str, str] | None = None) -> None:
        assert shutil.which("tinyproxy"), "tinyproxy is missing: `make test` installs it (apt-get install tinyproxy)"
        self.name = name
        self.port = free_port()
        self.conf = directory / f"{name}.conf"
        auth = f"BasicAuth {credentials[0]} {credentials[1]}\n" if credentials else ""
        self.conf.write_text(f"Port {self.port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 50\nAllow 127.0.0.1\n"
                             f'AddHeader "{PROXY_HEADER}" "{name}"\nDisableViaHeader Yes\nLogLevel Warning\n{auth}')
        user = f"{credentials[0]}:{credentials[1]}@" if credentials else ""
        self.url = f"http://{user}127.0.0.1:{self.port}"
        self.log = directory / f"{name}.log"
        self.proc = subprocess.Popen(["tinyproxy", "-d", "-c", str(self.conf)], stdout=open(self.log, "ab"),
                                     stderr=subprocess.STDOUT)
        wait_for(lambda: _accepts(self.port), timeout=15, message=f"tinyproxy {name} to listen")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class RationingOrigin:
    """Serves a page at any path, but refuses (429) an exit after ``allowance`` requests in the
    current window; exits are told apart by the proxy's header ("direct" without one)."""

    def __init__(self, allowance: int) -> None:
        self.allowance = allowance
        self.served: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.window: Counter[str] = Counter()
        self.lock = threading.Lock()
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                exit_name = self.headers.get(PROXY_HEADER, "direct")
                with origin.lock:
                    origin.window[exit_name] += 1
                    allowed = origin.window[exit_name] <= origin.allowance
                    (origin.served if allowed else origin.refused)[exit_name] += 1
                send(self, b'<a href="/story">Story</a>' if allowed else b"slow down", status=200 if allowed else 429)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def new_window(self) -> None:
        with self.lock:
            self.window.clear()

    def requests(self) -> int:
        with self.lock:
            return sum(self.served.values()) + sum(self.refused.values())

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

"""The home's secret key (``MONITOR_HOME/home.key``, mode 0600, made on first use).

It does two things:

* **Job tokens.** Every job the scheduler issues carries a token, ``<issued_ms>.<mac>``:
  an HMAC-SHA256 of the watch id and the issue time under the key. A worker copies the
  token into its task, and the processor applies only tasks whose token it can verify. A
  broker client without the key (the key never leaves the home) cannot invent a task for
  a watch, pre-seed its links or point its alerts elsewhere. A task may come late or twice
  (the processor drops stale and duplicate results), so a token does not expire.
* **The home id.** A digest of the key that names this home on the broker (see
  :func:`monitor.amqp.claim_vhost`): public, and stable for as long as the home exists.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_FILE = "home.key"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file only its owner can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


class HomeKey:
    """Signs and verifies job tokens, and names the home."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def load(cls, home: Path) -> "HomeKey":
        """The key of ``home``, made now if the home has none (two processes starting at
        once agree: only one creation succeeds, the other reads it)."""
        path = home / KEY_FILE
        if not path.exists():
            draft = path.with_name(f"{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
            write_private(draft, secrets.token_hex(32) + "\n")
            try:
                os.link(draft, path)  # atomic, and fails if another process was first
            except FileExistsError:
                pass
            finally:
                draft.unlink()
        text = path.read_text().strip()
        if len(text) < 32:
            raise ValueError(f"{path} is damaged (too short): remove it to make a new key")
        return cls(text.encode())

    @property
    def home_id(self) -> str:
        """A public name of this home, derived from the key."""
        return hashlib.sha256(b"home-id:" + self._key).hexdigest()[:16]

    def sign(self, text: str) -> str:
        """An HMAC of ``text`` under the home's key (the web front's CSRF tokens)."""
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()[:32]

    def _mac(self, watch_id: int, issued_ms: int) -> str:
        return hmac.new(self._key, f"{watch_id}.{issued_ms}".encode(), hashlib.sha256).hexdigest()[:32]

    def token(self, watch_id: int, issued_at: float) -> str:
        """The token of a job for ``watch_id`` issued at ``issued_at`` (epoch seconds)."""
        issued_ms = int(issued_at * 1000)
        return f"{issued_ms}.{self._mac(watch_id, issued_ms)}"

    def verify(self, watch_id: int, token: str | None) -> bool:
        """Whether ``token`` was issued by this home for a job of ``watch_id``."""
        issued, _, mac = (token or "").partition(".")
        if not (issued.isascii() and issued.isdigit()) or len(issued) > 16:
            return False
        return hmac.compare_digest(mac, self._mac(watch_id, int(issued)))

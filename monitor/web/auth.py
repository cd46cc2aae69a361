"""Who may use the web front, and forms that only its own pages can submit.

On a loopback address the front is as open as the CLI on the same machine. Anywhere else it
refuses to start without a token (``MONITOR_WEB_TOKEN``, or ``web_token`` in the TOML file),
and every request must carry it: ``Authorization: Bearer TOKEN`` for scripts, or HTTP basic
auth with the token as the password (any user name) for a browser, which asks once.

Forms carry a CSRF token: an HMAC, under the home's key, of a random value the browser keeps
in a ``SameSite=Strict`` cookie. Another site can make a browser post a form here, but
cannot read the cookie, so it cannot write the matching token.

Two more guards cover what a browser can be made to send without a form (the API's JSON
posts): a request another site started (its ``Origin`` or ``Sec-Fetch-Site`` says so) may
not change anything; and a front without a token answers only to a loopback host name, so
a page whose name an attacker points at 127.0.0.1 (DNS rebinding) is not answered either.
"""
from __future__ import annotations

import base64
import hmac
import ipaddress
import secrets

from monitor.homekey import HomeKey

CSRF_COOKIE = "monitor_csrf"


class Unauthorized(Exception):
    """The request carries no valid token."""


def is_loopback(host: str) -> bool:
    """Whether the bind address only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_host(host_header: str) -> bool:
    """Whether a request's ``Host`` names this machine's loopback (``localhost:PORT``,
    ``127.0.0.1:PORT``, ``[::1]:PORT``), as a browser on this machine or a tunnel to it sends."""
    host = host_header.rpartition(":")[0] if host_header.rpartition(":")[2].isdigit() else host_header
    return is_loopback(host.removeprefix("[").removesuffix("]").lower())


def cross_site(origin: str | None, fetch_site: str | None, host_header: str) -> bool:
    """Whether a browser sent this request for another site's page: ``Sec-Fetch-Site`` says
    so, or ``Origin`` names another host than the one asked. (Scripts send neither.)"""
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return True
    if not origin:
        return False
    return origin == "null" or origin.partition("://")[2].rstrip("/").lower() != host_header.lower()


def presented_token(authorization: str | None) -> str | None:
    """The token an ``Authorization`` header carries (bearer, or basic auth's password)."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[2]
        except (ValueError, UnicodeDecodeError):
            return None
    return None


def check_token(expected: str | None, authorization: str | None) -> None:
    """Raise :class:`Unauthorized` unless no token is required or the right one is presented."""
    if not expected:
        return
    token = presented_token(authorization)
    if token is None or not hmac.compare_digest(token.encode(), expected.encode()):
        raise Unauthorized("a token is required: Authorization: Bearer TOKEN (or basic auth, the token as password)")


def new_csrf_cookie() -> str:
    return secrets.token_urlsafe(24)


def csrf_token(key: HomeKey, cookie: str) -> str:
    """The token a form must carry for a browser holding ``cookie``."""
    return key.sign(f"csrf:{cookie}")


def csrf_ok(key: HomeKey, cookie: str | None, token: str | None) -> bool:
    return bool(cookie and token) and hmac.compare_digest(csrf_token(key, cookie).encode(), token.encode())

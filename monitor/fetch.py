"""Bounded HTTP fetching of one page.

Every fetch is bounded: connect and read timeouts, a total deadline, a cap on the decoded
body size (so a gzip bomb stops at the cap), a redirect limit with each hop checked
against the private-address guard, and HTML content types only. Failures come back as a
:class:`FetchError` whose message is the one line a user sees in ``monitor watch list``.

Requests go through urllib3, the HTTP engine requests is built on, without requests'
session layer: that layer cost 0.2-0.3 ms of CPU per page (measured: 0.53 against 0.33 ms
for a 100 KB page), a third of a re-check, and a requests session is not safe to share
between threads, so each fetch thread kept its own pools and rarely reused a connection.
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import unquote, urljoin

import certifi
import urllib3

from monitor.config import Config
from monitor.urls import BadURL, address_refusal, check_public, normalize, scrub_credentials

HTML_TYPES = ("text/html", "application/xhtml+xml")
_CHUNK = 64 * 1024
_REDIRECTS = (301, 302, 303, 307, 308)
_SOCKS_PROXY_DOWN = "Error connecting to SOCKS"  # PySocks, when the SOCKS proxy itself cannot be reached


# Answers by which a site refuses the requester rather than the request: another exit may succeed.
REFUSAL_STATUSES = (403, 429, 503)
PROXY_AUTH_REQUIRED = 407


class FetchError(Exception):
    """A fetch that produced no page; ``str(error)`` is a one-line reason.

    ``refusal``: the site refused the requester (a refusing HTTP status): another exit may
    succeed. ``proxy_failed``: the proxy itself failed (unreachable, 407, CONNECT refused):
    the page was never asked for. Anything else (connection refused or reset by the site,
    TLS errors, timeouts, other statuses) is the site's error, whatever the exit.
    """

    def __init__(self, reason: str, http_status: int | None = None, final_url: str | None = None,
                 proxy_failed: bool = False) -> None:
        super().__init__(reason)
        self.http_status = http_status
        self.final_url = final_url
        self.proxy_failed = proxy_failed
        self.refusal = not proxy_failed and http_status in REFUSAL_STATUSES


@dataclass(frozen=True)
class Page:
    """A fetched page; ``http_status`` 304 means "not modified since the validators sent"
    (empty body). ``etag`` and ``last_modified`` are the response's validators."""
    final_url: str
    http_status: int
    body: bytes
    charset: str | None
    elapsed_ms: int
    etag: str | None = None
    last_modified: str | None = None


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:g} MB"


class AddressRefused(Exception):
    """A direct connection reached an address the guard refuses (DNS answered differently
    when connecting than when :func:`check_public` looked: DNS rebinding)."""


def _guarded_pools(allow_private: bool) -> dict[str, type]:
    """urllib3 pool classes whose connections check the address they actually reached."""
    def checked(sock: socket.socket) -> socket.socket:
        reason = address_refusal(sock.getpeername()[0], allow_private)
        if reason is not None:
            sock.close()
            raise AddressRefused(f"connected to {reason}")
        return sock

    class GuardedHTTPConnection(urllib3.connection.HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return checked(super()._new_conn())

    class GuardedHTTPSConnection(urllib3.connection.HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return checked(super()._new_conn())

    class GuardedHTTPPool(urllib3.HTTPConnectionPool):
        ConnectionCls = GuardedHTTPConnection

    class GuardedHTTPSPool(urllib3.HTTPSConnectionPool):
        ConnectionCls = GuardedHTTPSConnection

    return {"http": GuardedHTTPPool, "https": GuardedHTTPSPool}


class Connections:
    """Keep-alive connection pools shared by every fetch thread of a process: one manager for
    direct fetches, one per proxy (urllib3's managers are thread-safe, so a host fetched by
    any thread reuses the connection the last fetch left open).

    ``hosts`` bounds the idle connections kept per manager (least recently used go first).
    Direct connections check the address they reached against the guard (through a proxy,
    the proxy resolves the name: the guard can only check the URL beforehand).
    """

    def __init__(self, config: Config, hosts: int = 1000) -> None:
        self.hosts = hosts
        self.allow_private = config.allow_private
        self._lock = threading.Lock()
        self._managers: dict[str | None, urllib3.PoolManager] = {}

    def manager(self, proxy: str | None) -> urllib3.PoolManager:
        """The manager for fetches through ``proxy`` (None: direct)."""
        with self._lock:
            manager = self._managers.get(proxy)
            if manager is None:
                manager = self._managers[proxy] = self._new(proxy)
            return manager

    def drop(self, proxies: list[str]) -> None:
        """Close the pools of proxies no longer used (a fetch still running on one finishes)."""
        with self._lock:
            managers = [self._managers.pop(proxy) for proxy in proxies if proxy in self._managers]
        for manager in managers:
            manager.clear()

    def _new(self, proxy: str | None) -> urllib3.PoolManager:
        # maxsize 1: a worker never fetches one host twice at once (extra connections are
        # opened when needed and not kept). Through a proxy every plain-HTTP fetch shares
        # the connections to the proxy, so keep more of those.
        options = {"num_pools": self.hosts, "maxsize": 1, "block": False, "ca_certs": certifi.where()}
        if proxy is None:
            manager = urllib3.PoolManager(**options)
            manager.pool_classes_by_scheme = _guarded_pools(self.allow_private)
            return manager
        parsed = urllib3.util.parse_url(proxy)
        if parsed.scheme in ("socks5", "socks5h"):
            from urllib3.contrib.socks import SOCKSProxyManager  # needs PySocks: import only when used
            return SOCKSProxyManager(proxy, **options)
        auth = urllib3.util.make_headers(proxy_basic_auth=unquote(parsed.auth)) if parsed.auth else None
        return urllib3.ProxyManager(parsed._replace(auth=None).url, proxy_headers=auth,
                                    **dict(options, maxsize=32))




def _read_body(response: urllib3.BaseHTTPResponse, config: Config, deadline: float) -> bytes:
    """Read the decoded body chunk by chunk, enforcing the size cap and the total deadline.

    ``read1`` returns whatever one socket read yields, so a server trickling bytes cannot
    hold a single call longer than the read timeout.
    """
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and "Content-Encoding" not in response.headers and int(declared) > config.fetch_max_bytes:
        raise FetchError(f"body exceeds {_megabytes(config.fetch_max_bytes)}", response.status)
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise FetchError(f"deadline of {config.fetch_deadline:g}s exceeded while reading the body", response.status)
        chunk = response.read1(_CHUNK, decode_content=True)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > config.fetch_max_bytes:
            raise FetchError(f"body exceeds {_megabytes(config.fetch_max_bytes)}", response.status)
        chunks.append(chunk)


def fetch(url: str, config: Config, connections: Connections | None = None, proxy: str | None = None,
          etag: str | None = None, last_modified: str | None = None) -> Page:
    """Fetch ``url`` (through ``proxy`` when given) within the configured bounds and return
    the page, or raise FetchError.

    With ``etag`` / ``last_modified`` (the validators of the last check) the request is
    conditional, and a server that has nothing new answers 304 with no body.
    """
    manager = (connections or Connections(config, hosts=10)).manager(proxy)
    started = time.monotonic()
    deadline = started + config.fetch_deadline
    headers = {"User-Agent": config.user_agent, "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1",
               "Accept-Encoding": "gzip, deflate"}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    timeout = urllib3.Timeout(connect=config.fetch_connect_timeout, read=config.fetch_read_timeout)
    current = url
    for _ in range(config.fetch_max_redirects + 1):
        if time.monotonic() > deadline:
            raise FetchError(f"deadline of {config.fetch_deadline:g}s exceeded", final_url=current)
        try:
            check_public(current, config.allow_private)
        except BadURL as exc:
            raise FetchError(f"refused: {exc}", final_url=current) from None
        response = _request(manager, current, headers, timeout, config, proxy is not None)
        if proxy is not None and response.status == PROXY_AUTH_REQUIRED:
            response.close()
            raise FetchError("proxy failed: HTTP 407 Proxy Authentication Required", 407, current, proxy_failed=True)
        try:
            page = _page(response, current, config, deadline, started, etag, last_modified)
        except BaseException:
            response.close()  # the body was not read to its end: the connection cannot be reused
            raise
        if page is not None:
            response.release_conn()  # read to the end: the connection serves the next request
            return page
        location = response.headers.get("Location", "")
        response.close()
        try:
            current = normalize(urljoin(current, location))
        except ValueError as exc:  # BadURL, or urljoin's own complaint
            raise FetchError(f"bad redirect: {exc}", response.status, current) from None
        if not current.startswith(("http://", "https://")):
            raise FetchError(f"redirect to a non-web URL {location!r}", response.status, current)
    raise FetchError(f"more than {config.fetch_max_redirects} redirects", final_url=current)


def _request(manager: urllib3.PoolManager, url: str, headers: dict[str, str], timeout: urllib3.Timeout,
             config: Config, proxied: bool) -> urllib3.BaseHTTPResponse:
    """Send one GET (no retries, no redirects followed) and return the response, body unread."""
    try:
        return manager.urlopen("GET", url, headers=headers, timeout=timeout, retries=False, redirect=False,
                               preload_content=False, decode_content=True)
    except AddressRefused as exc:
        raise FetchError(f"refused: {exc}", final_url=url) from None
    except urllib3.exceptions.ProxyError as exc:  # the proxy unreachable, or its CONNECT refused
        raise FetchError(_proxy_failure(exc), final_url=url, proxy_failed=True) from None
    except urllib3.exceptions.NewConnectionError as exc:  # refused, unreachable, no such name
        if proxied and _SOCKS_PROXY_DOWN in str(exc):
            raise FetchError(f"proxy failed: {_first_line(exc)}", final_url=url, proxy_failed=True) from None
        raise FetchError(f"connection failed: {_first_line(exc)}", final_url=url) from None
    except urllib3.exceptions.ConnectTimeoutError:
        raise FetchError(f"connect timeout after {config.fetch_connect_timeout:g}s", final_url=url) from None
    except urllib3.exceptions.ReadTimeoutError:
        raise FetchError(f"read timeout after {config.fetch_read_timeout:g}s", final_url=url) from None
    except (urllib3.exceptions.SSLError, urllib3.exceptions.ProtocolError, OSError) as exc:
        raise FetchError(f"connection failed: {_first_line(exc)}", final_url=url) from None
    except (urllib3.exceptions.HTTPError, ValueError) as exc:
        raise FetchError(f"request failed: {_first_line(exc)}", final_url=url) from None


def _page(response: urllib3.BaseHTTPResponse, url: str, config: Config, deadline: float, started: float,
          etag: str | None, last_modified: str | None) -> Page | None:
    """The page a response carries (its body read), None for a redirect, or FetchError."""
    status = response.status
    if status in _REDIRECTS and "Location" in response.headers:
        return None
    if status == 304:
        if not (etag or last_modified):
            raise FetchError("HTTP 304 to a request that was not conditional", 304, url)
        return Page(url, 304, b"", None, int((time.monotonic() - started) * 1000), etag, last_modified)
    if status >= 400:
        raise FetchError(f"HTTP {status} {response.reason or ''}".strip(), status, url)
    content_type = response.headers.get("Content-Type", "")
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime and mime not in HTML_TYPES:
        raise FetchError(f"not HTML: content type {mime}", status, url)
    try:
        body = _read_body(response, config, deadline)
    except (urllib3.exceptions.HTTPError, OSError) as exc:  # timeouts, bad gzip, resets
        raise FetchError(f"reading the body failed: {_first_line(exc)}", status, url) from None
    return Page(url, status, body, _charset(content_type), int((time.monotonic() - started) * 1000),
                _header(response, "ETag"), _header(response, "Last-Modified"))


def _header(response: urllib3.BaseHTTPResponse, name: str) -> str | None:
    """A validator header worth keeping (short, printable), or None."""
    value = response.headers.get(name, "").strip()
    return value if 0 < len(value) <= 200 and value.isprintable() else None


def _charset(content_type: str) -> str | None:
    """The ``charset`` parameter of a Content-Type header, if any."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def _proxy_failure(exc: urllib3.exceptions.ProxyError) -> str:
    """``proxy failed: <why>``, saying "cannot connect" rather than urllib3's wrapped reprs."""
    cause = getattr(exc, "original_error", None) or exc
    if isinstance(cause, urllib3.exceptions.NewConnectionError):
        return f"proxy failed: cannot connect to the proxy ({_first_line(cause).rpartition(': ')[2]})"
    return f"proxy failed: {_first_line(cause)}"


def _first_line(exc: BaseException) -> str:
    """The start of an exception's message, credentials masked (proxy URLs may carry them)."""
    text = str(exc) or type(exc).__name__
    return scrub_credentials(text.splitlines()[0])[:200]

"""Bounded HTTP fetching of one page.

Every fetch is bounded: connect and read timeouts, a total deadline, a cap on the decoded
body size (so a gzip bomb stops at the cap), a redirect limit with each hop checked
against the private-address guard, and HTML content types only. Failures come back as a
:class:`FetchError` whose message is the one line a user sees in ``monitor watch list``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urljoin

import requests
import urllib3

from monitor.config import Config
from monitor.urls import BadURL, check_public, normalize, scrub_credentials

HTML_TYPES = ("text/html", "application/xhtml+xml")
_CHUNK = 64 * 1024


# Answers by which a site (or a proxy) refuses the requester rather than the request.
REFUSAL_STATUSES = (403, 407, 429, 503)


class FetchError(Exception):
    """A fetch that produced no page; ``str(error)`` is a one-line reason.

    ``refusal`` is true when another exit (proxy) might succeed: a refusing HTTP status,
    or a proxy or connection error.
    """

    def __init__(self, reason: str, http_status: int | None = None, final_url: str | None = None,
                 refusal: bool = False) -> None:
        super().__init__(reason)
        self.http_status = http_status
        self.final_url = final_url
        self.refusal = refusal or http_status in REFUSAL_STATUSES


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


def _read_body(response: requests.Response, config: Config, deadline: float) -> bytes:
    """Read the decoded body chunk by chunk, enforcing the size cap and the total deadline.

    ``read1`` returns whatever one socket read yields, so a server trickling bytes cannot
    hold a single call longer than the read timeout.
    """
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and "Content-Encoding" not in response.headers and int(declared) > config.fetch_max_bytes:
        raise FetchError(f"body exceeds {_megabytes(config.fetch_max_bytes)}", response.status_code)
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise FetchError(f"deadline of {config.fetch_deadline:g}s exceeded while reading the body", response.status_code)
        chunk = response.raw.read1(_CHUNK, decode_content=True)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > config.fetch_max_bytes:
            raise FetchError(f"body exceeds {_megabytes(config.fetch_max_bytes)}", response.status_code)
        chunks.append(chunk)


def new_session() -> requests.Session:
    """A session for fetching pages. Proxies come from the exit pool only, never from the
    environment: ``trust_env`` would also re-read every environment variable on every
    request (half a millisecond of CPU each)."""
    session = requests.Session()
    session.trust_env = False
    return session


def fetch(url: str, config: Config, session: requests.Session | None = None, proxy: str | None = None,
          etag: str | None = None, last_modified: str | None = None) -> Page:
    """Fetch ``url`` (through ``proxy`` when given) within the configured bounds and return
    the page, or raise FetchError.

    With ``etag`` / ``last_modified`` (the validators of the last check) the request is
    conditional, and a server that has nothing new answers 304 with no body.
    """
    session = session or new_session()
    proxies = {"http": proxy, "https": proxy} if proxy else None
    started = time.monotonic()
    deadline = started + config.fetch_deadline
    headers = {"User-Agent": config.user_agent, "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    current = url
    for _ in range(config.fetch_max_redirects + 1):
        if time.monotonic() > deadline:
            raise FetchError(f"deadline of {config.fetch_deadline:g}s exceeded", final_url=current)
        try:
            check_public(current, config.allow_private)
        except BadURL as exc:
            raise FetchError(f"refused: {exc}", final_url=current) from None
        try:
            response = session.get(
                current, headers=headers, stream=True, allow_redirects=False, proxies=proxies,
                timeout=(config.fetch_connect_timeout, config.fetch_read_timeout),
            )
        except requests.exceptions.ProxyError as exc:
            raise FetchError(f"proxy failed: {_first_line(exc)}", final_url=current, refusal=True) from None
        except requests.exceptions.ConnectTimeout:
            raise FetchError(f"connect timeout after {config.fetch_connect_timeout:g}s", final_url=current,
                             refusal=True) from None
        except requests.exceptions.ReadTimeout:
            raise FetchError(f"read timeout after {config.fetch_read_timeout:g}s", final_url=current) from None
        except requests.exceptions.ConnectionError as exc:
            raise FetchError(f"connection failed: {_first_line(exc)}", final_url=current, refusal=True) from None
        except requests.exceptions.RequestException as exc:
            raise FetchError(f"request failed: {_first_line(exc)}", final_url=current) from None
        with response:
            if response.is_redirect:
                location = response.headers.get("Location", "")
                try:
                    current = normalize(urljoin(current, location))
                except BadURL as exc:
                    raise FetchError(f"bad redirect: {exc}", response.status_code, current) from None
                if not current.startswith(("http://", "https://")):
                    raise FetchError(f"redirect to a non-web URL {location!r}", response.status_code, current)
                continue
            if response.status_code == 304:
                if not (etag or last_modified):
                    raise FetchError("HTTP 304 to a request that was not conditional", 304, current)
                return Page(current, 304, b"", None, int((time.monotonic() - started) * 1000), etag, last_modified)
            if response.status_code >= 400:
                raise FetchError(f"HTTP {response.status_code} {response.reason or ''}".strip(), response.status_code, current)
            content_type = response.headers.get("Content-Type", "")
            mime = content_type.split(";", 1)[0].strip().lower()
            if mime and mime not in HTML_TYPES:
                raise FetchError(f"not HTML: content type {mime}", response.status_code, current)
            try:
                body = _read_body(response, config, deadline)
            # read1 surfaces urllib3's own errors (timeouts, bad gzip) and socket errors, not requests'.
            except (urllib3.exceptions.HTTPError, requests.exceptions.RequestException, OSError) as exc:
                raise FetchError(f"reading the body failed: {_first_line(exc)}", response.status_code, current) from None
            response.raw.release_conn()  # read to the end: the connection can serve the next request
            elapsed_ms = int((time.monotonic() - started) * 1000)
            return Page(current, response.status_code, body, _charset(content_type), elapsed_ms,
                        _header(response, "ETag"), _header(response, "Last-Modified"))
    raise FetchError(f"more than {config.fetch_max_redirects} redirects", final_url=current)


def _header(response: requests.Response, name: str) -> str | None:
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


def _first_line(exc: BaseException) -> str:
    """The start of an exception's message, credentials masked (proxy URLs may carry them)."""
    text = str(exc) or type(exc).__name__
    return scrub_credentials(text.splitlines()[0])[:200]

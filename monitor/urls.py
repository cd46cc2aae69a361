"""URL normalisation, validation of watch targets, and the private-address guard.

One place decides what two URLs being "the same link" means (:func:`normalize`), which
URLs may be watched (:func:`validate_watch_url`) and which addresses may be fetched
(:func:`check_public`).
"""
from __future__ import annotations

import ipaddress
import re
import socket
import string
from typing import Callable, Iterable
from urllib.parse import SplitResult, quote, unquote, urlsplit, urlunsplit

WEB_SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Characters left as they are when re-quoting a path or query (RFC 3986 reserved + unreserved + '%').
_SAFE_PATH = "/:@!$&'()*+,;=-._~%"
_SAFE_QUERY = _SAFE_PATH + "?"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = set(string.ascii_letters + string.digits + "-._~")
_HOST = re.compile(r"^[a-z0-9_-]{1,63}(\.[a-z0-9_-]{1,63})*$|^[0-9a-f.]*:[0-9a-f:.]*$")  # DNS labels of 1-63 characters, or an IPv6 literal
# NAT64 (RFC 6052) and IPv4-translated (RFC 2765) addresses embed an IPv4 address in their last 32 bits.
_EMBEDDING_IPV4 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("::ffff:0:0:0/96"))


# A URL in this shape is already what normalize() returns (minus fragment and empty query),
# which most links on real pages are; they skip urlsplit and quote():
# lower-case http(s), a plain lower-case host, a port that is not the default, and a path
# and query of characters quote() leaves alone, with no dot segment and only upper-case
# escapes of characters that are not unreserved.
_CHAR = r"[A-Za-z0-9:@!$&'()*+,;=\-_~%]"  # a "%" must start an escape: checked apart
_PLAIN = r"(?:/(?![.])" + _CHAR + r"*(?:\." + _CHAR + r"+)*)*"
_QUERY = r"(?:\?[A-Za-z0-9/:@!$&'()*+,;=\-._~?%]*)?"
_ABSOLUTE = re.compile(r"(https?)://[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*(?::([1-9][0-9]{0,4}))?"
                       r"(" + _PLAIN + r"/?)(" + _QUERY + r")(?:#.*)?", re.S)
NORMAL_PATH = re.compile(r"(" + _PLAIN + r"/?)(" + _QUERY + r")(?:#.*)?", re.S)
# normalize() rewrites these: a lone "%", a lower-case escape, an escaped unreserved character.
_UNUSUAL_ESCAPE = re.compile(r"%(?![0-9A-F]{2})|%(?:2[DE]|3[0-9]|4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE])")


class BadURL(ValueError):
    """A URL that cannot be watched or fetched; the message says why in one line."""


class Unresolvable(BadURL):
    """The host has no DNS answer right now (it may have one later)."""


def _host(parts: SplitResult) -> str:
    host = parts.hostname or ""
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        raise BadURL(f"invalid host name {parts.hostname!r}") from None
    host = host.lower().rstrip(".")
    if len(host) > 253 or not _HOST.match(host):
        raise BadURL(f"invalid host name {parts.hostname!r}")
    return host


def _uniform_escapes(text: str) -> str:
    """``%7e`` -> ``~`` (unreserved characters unescaped), other escapes in upper case."""
    def fix(match: re.Match) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()
    return _ESCAPE.sub(fix, text)


def has_unusual_escape(text: str) -> bool:
    """Whether normalize() would rewrite an escape in ``text`` (fragment aside)."""
    return "%" in text and _UNUSUAL_ESCAPE.search(text.split("#", 1)[0]) is not None


def normal_parts(url: str) -> tuple[str, str, str] | None:
    """``(origin, path, query)`` of a URL already in normal form, else None."""
    match = _ABSOLUTE.fullmatch(url)
    if match is None or has_unusual_escape(url):
        return None
    port = match.group(2)
    if port is not None and (int(port) == _DEFAULT_PORTS[match.group(1)] or int(port) > 65535):
        return None
    return url[:match.start(3)], match.group(3) or "/", match.group(4)


def join_normal(prefix: str, path: str, query: str) -> str:
    """URL from normal-form parts; an empty query (a lone ``?``) is dropped, as normalize does."""
    return prefix + path + (query if len(query) > 1 else "")


def normalize(url: str) -> str:
    """Canonical form of an absolute http(s) URL, so the same link always gets the same code.

    Lower-case scheme and host, IDNA host, default port and fragment dropped, empty path
    becomes ``/``, percent-encoding made uniform (RFC 3986 6.2.2); the query is kept in
    order (it is often meaningful on news sites).
    """
    normal = normal_parts(url)
    if normal is not None:
        return join_normal(*normal)
    try:
        return _canonical(url)
    except BadURL:
        raise
    except ValueError as exc:  # urlsplit's own complaints, such as an unclosed "[" of an IPv6 host
        raise BadURL(f"{url[:200]!r} is not a valid URL: {exc}") from None


# Query parameters that only say where a click came from: dropped when links are compared,
# so a link shared with them is the link without them.
TRACKING_PARAMS = frozenset({
    "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "igshid", "mc_cid", "mc_eid",
    "_ga", "_gl", "mkt_tok", "_hsenc", "_hsmi", "__hstc", "__hssc", "__hsfp", "oly_anon_id", "oly_enc_id", "vero_id",
})


def _tracking(name: str) -> bool:
    lowered = name.lower()
    return lowered in TRACKING_PARAMS or lowered.startswith("utm_")


def comparable(normal: str, ignore: frozenset[str] = frozenset()) -> str:
    """The form of a :func:`normalize`\\ d URL under which links are compared and remembered:
    tracking parameters (``utm_*``, ``fbclid``, ``gclid`` ...) and those named in ``ignore``
    (lower case: a watch's session ids and cache-busters) dropped, and the other query
    parameters sorted (``?b=2&a=1`` and ``?a=1&b=2`` are one link). Without a query it is
    the URL itself."""
    base, sep, query = normal.partition("?")
    if not sep:
        return normal
    kept = sorted(part for part in query.split("&") if part and not _tracking(name := param_name(part))
                  and name not in ignore)
    return f"{base}?{'&'.join(kept)}" if kept else base


def param_name(part: str) -> str:
    """The name of a ``name=value`` query part, lower case (as parameters are ignored)."""
    return part.partition("=")[0].lower()


def param_names(url: str) -> set[str]:
    """The names of ``url``'s query parameters, lower case."""
    return {param_name(part) for part in url.partition("?")[2].split("&") if part}


def renewing_params(new: list[str], current: list[str], known: Callable[[], Iterable[str]],
                    min_links: int = 2, coverage: float = 0.9, most: int = 20) -> dict[str, int]:
    """The query parameters whose value alone renewed a page's links on one check, each with
    how many of the ``new`` links it renewed: the signs of a session id or a cache-buster
    appended per request. All URLs are :func:`comparable`; ``known`` (the links known
    before) is called only when some parameter may qualify.

    A parameter qualifies when at least ``min_links`` new links are known links that left
    the page but for its value, those are at least ``coverage`` of the page's links that
    carry it, and it tells none of the page's links apart (an article's ``?id=`` does).
    At most ``most`` parameter names are looked at (a page of random names is no sign)."""
    counts: dict[str, int] = {}
    for url in new:
        for name in param_names(url):
            counts[name] = counts.get(name, 0) + 1
    if not any(count >= min_links for count in counts.values()):
        return {}  # the common case: new stories without a parameter in common
    names = {url: param_names(url) for url in current}
    candidates = {}
    for name in sorted(counts, key=counts.get, reverse=True)[:most]:
        having = [comparable(url, frozenset({name})) for url, found in names.items() if name in found]
        if counts[name] >= min_links and counts[name] >= coverage * len(having) and len(set(having)) == len(having):
            candidates[name] = frozenset({name})
    if not candidates:
        return {}
    gone: dict[str, set[str]] = {name: set() for name in candidates}
    for url in known():
        if url not in names:
            for name in param_names(url) & candidates.keys():
                gone[name].add(comparable(url, candidates[name]))
    renewed = {}
    for name, ignore in candidates.items():
        hits = sum(comparable(url, ignore) in gone[name] for url in new if name in param_names(url))
        having = sum(name in found for found in names.values())
        if hits >= min_links and hits >= coverage * having:
            renewed[name] = hits
    return renewed


def _canonical(url: str) -> str:
    """:func:`normalize` the long way, for URLs not already in normal form."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = _host(parts)
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        raise BadURL(f"invalid port in {url!r}") from None
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    if parts.username or parts.password:
        userinfo = quote(unquote(parts.username or ""), safe="")
        if parts.password:
            userinfo += ":" + quote(unquote(parts.password), safe="")
        netloc = f"{userinfo}@{netloc}"
    path = _uniform_escapes(quote(parts.path or "/", safe=_SAFE_PATH))
    query = _uniform_escapes(quote(parts.query, safe=_SAFE_QUERY))
    return urlunsplit((scheme, netloc, path, query, ""))


# What the start of a URL without its scheme looks like: a dotted host name, an IPv4
# address, localhost or a bracketed IPv6 address, then an optional port and path.
_HOST_FIRST = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.[a-z0-9-]{2,}"
                         r"|\d{1,3}(?:\.\d{1,3}){3}|localhost|\[[0-9a-f:.]+\])(?::\d{1,5})?(?:[/?#]\S*)?$", re.IGNORECASE)


def validate_watch_url(url: str) -> str:
    """Check that ``url`` is an absolute http(s) URL with a host; return it normalised."""
    text = (url or "").strip()
    if not text:
        raise BadURL("empty URL")
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise BadURL(f"{text[:200]!r} is not a valid URL: {exc}") from None
    if "://" not in text:
        bare = text.lstrip("/")
        if _HOST_FIRST.match(bare):
            raise BadURL(f"{text!r} has no scheme: write it as https://{bare}")
        if parts.scheme:
            raise BadURL(f"{text!r}: unsupported scheme {parts.scheme!r} (only http and https can be watched)")
        raise BadURL(f"{text!r} is not a web address: write it as https://host/path")
    if parts.scheme.lower() not in WEB_SCHEMES:
        raise BadURL(f"{text!r}: unsupported scheme {parts.scheme!r} (only http and https can be watched)")
    if not parts.hostname:
        raise BadURL(f"{text!r} has no host")
    if any(ch.isspace() for ch in text):
        raise BadURL(f"{text!r} contains whitespace")
    return normalize(text)


def _unwrapped(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address, or the IPv4 address an IPv6 one carries (IPv4-mapped, 6to4, NAT64,
    IPv4-translated): the host that is reached in the end."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in _EMBEDDING_IPV4) or 1 < int(ip) < 2**32:  # or IPv4-compatible ::a.b.c.d
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        return ip.ipv4_mapped or ip.sixtofour or ip
    return ip


def is_public_address(address: str) -> bool:
    """True for globally routable addresses; False for loopback, private, link-local
    (cloud metadata lives at 169.254.169.254), shared, reserved and multicast ones."""
    if ":" in address and int(ipaddress.ip_address(address.split("%", 1)[0])) < 2**32:
        return False  # ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d
    ip = _unwrapped(address)
    return ip.is_global and not ip.is_multicast


def is_link_local(address: str) -> bool:
    """169.254.0.0/16 and fe80::/10, however wrapped: where cloud metadata services answer."""
    return _unwrapped(address).is_link_local


# Top-level names reserved never to resolve (RFC 2606/6761): asking DNS would only leak the query.
NEVER_RESOLVED = frozenset({"example", "invalid"})


def check_public(url: str, allow_private: bool = False) -> None:
    """Raise :class:`BadURL` unless every address the URL's host resolves to may be fetched.

    By default only public addresses may; ``allow_private`` admits loopback and private
    networks too, but never link-local ones (cloud metadata). Called at ``watch add`` and
    again before every request (including each redirect hop), because DNS answers change.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        reserved = host.rstrip(".").rpartition(".")[2] in NEVER_RESOLVED
        if reserved:
            host.encode("idna")  # the label checks a lookup would make
            infos = []
        else:
            infos = socket.getaddrinfo(host, parts.port or _DEFAULT_PORTS.get(parts.scheme, 80), proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise Unresolvable(f"cannot resolve {host}: {exc.strerror}") from None
    except ValueError as exc:  # a bad port, an unclosed "[", a host label IDNA refuses (UnicodeError)
        raise BadURL(f"{url[:200]!r} is not a valid URL: {exc}") from None
    if reserved:
        raise Unresolvable(f"cannot resolve {host}: a reserved name (RFC 6761) that no DNS answers")
    for info in infos:
        reason = address_refusal(info[4][0], allow_private)
        if reason is not None:
            raise BadURL(f"{host} resolves to {reason}")


def address_refusal(address: str, allow_private: bool = False) -> str | None:
    """Why ``address`` may not be fetched from (the end of a one-line reason), or None."""
    if is_link_local(address):
        return f"link-local address {address} (cloud metadata is never fetched)"
    if not allow_private and not is_public_address(address):
        return f"non-public address {address} (set MONITOR_ALLOW_PRIVATE=1 to allow)"
    return None


_USERINFO = re.compile(r"(//[^/@\s:'\"]+):[^/@\s'\"]*@")


def scrub_credentials(text: str) -> str:
    """Mask every ``//user:password@`` in free text (error messages may quote a proxy URL)."""
    return _USERINFO.sub(r"\1:***@", text)


MASK = "***"  # what a password looks like wherever a URL is shown


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``, safe for logs and status output."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{MASK}@{netloc}"))


def without_userinfo(url: str) -> str:
    """The URL without ``user:password@`` (links found on a page never carry the watch's credentials)."""
    if "@" not in url:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])) if "@" in parts.netloc else url

"""The worker fleet: ``monitor proxy ...`` (the VPN exits), ``monitor workers`` and
``monitor hosts`` (the host disable list). The ``cmd_*`` handlers print; :func:`add_proxy`,
:func:`try_proxy` and :func:`enable_host` do the work and are shared with the web API."""
from __future__ import annotations

import dataclasses
import socket
import sys
import time
from urllib.parse import urlsplit

from monitor import amqp
from monitor.cli.common import RuntimeFailure, UsageError, print_json, table, ts, watch_url
from monitor.durations import format_age
from monitor.fetch import FetchError, fetch
from monitor.log import describe, get_logger
from monitor.messages import HostDisabled
from monitor.store import MAX_ID, Duplicate, NotFound, Proxy, Store, parse_id
from monitor.urls import redact, scrub_credentials

# --- proxies and workers -----------------------------------------------------------------------
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")
TEST_PAGE = "https://example.org/"  # what `proxy add` and `proxy test` fetch through a proxy by default


def _proxy_url(url: str) -> str:
    text = (url or "").strip()
    shown = scrub_credentials(text)  # (not redact: a URL too broken to split is shown as well)
    try:
        parts = urlsplit(text)
        if parts.scheme.lower() not in PROXY_SCHEMES:
            raise UsageError(f"{shown!r}: a proxy URL starts with one of {', '.join(s + '://' for s in PROXY_SCHEMES)}")
        if not parts.hostname or not parts.port:
            raise ValueError
    except ValueError:
        raise UsageError(f"{shown!r}: a proxy URL needs a host and a port, e.g. http://user:pass@10.0.0.5:3128") from None
    return text


def _find_proxy(store: Store, ref: str):
    proxy_id = parse_id(ref)
    if proxy_id is not None and proxy_id > MAX_ID:
        raise UsageError(f"no proxy with id {ref[:30]}{'...' if len(ref) > 30 else ''}")
    if proxy_id is not None:
        try:
            return store.get_proxy(proxy_id)
        except NotFound as exc:
            raise UsageError(str(exc)) from None
    for proxy in store.list_proxies():
        if proxy.url == ref:
            return proxy
    raise UsageError(f"no proxy {redact(ref)} in the pool")


def _through(proxy_url: str, page: str, config) -> tuple[bool, str]:
    """Connect to the proxy, then fetch ``page`` through it: whether the proxy itself
    worked, and a line saying how it went (the page may fail for reasons of its own)."""
    parts = urlsplit(proxy_url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=config.fetch_connect_timeout).close()
    except OSError as exc:
        return False, f"cannot connect to the proxy {redact(proxy_url)}: {exc.strerror or type(exc).__name__}"
    try:
        fetched = fetch(page, config, proxy=proxy_url)
    except FetchError as exc:
        return not exc.proxy_failed, f"{page} failed through {redact(proxy_url)}: {exc}"
    return True, f"ok through {redact(proxy_url)}: {page} answered HTTP {fetched.http_status} in {fetched.elapsed_ms} ms"


def add_proxy(config, store: Store, url: str, test: bool = True,
              page: str = TEST_PAGE) -> tuple[Proxy, str | None]:
    """Check a proxy as ``proxy add`` does (by fetching ``page`` through it unless ``test``
    is false) and add it: the proxy, and a warning when it answered but the page failed.
    UsageError, and nothing added, for a bad URL, a duplicate or a proxy that does not work."""
    url = _proxy_url(url)
    if any(proxy.url == url for proxy in store.list_proxies()):  # before testing it
        raise UsageError("this proxy is already in the pool")
    warning = None
    if test:
        checked_page, _ = watch_url(page, config)
        works, outcome = _through(url, checked_page, config)
        if not works:  # a mistyped proxy would fail every check it is given
            raise UsageError(f"{outcome}; nothing added (--no-test adds it untested)")
        if not outcome.startswith("ok"):
            warning = f"the proxy answered, but {outcome}"
    try:
        return store.add_proxy(url), warning
    except Duplicate as exc:
        raise UsageError(str(exc)) from None


def cmd_proxy_add(args, config, store) -> None:
    proxy, warning = add_proxy(config, store, args.url, not args.no_test, args.page)
    if warning:
        print(f"monitor: warning: {warning}", file=sys.stderr)
    print(f"added proxy {proxy.id}: {redact(proxy.url)}")


def proxy_dict(p: Proxy) -> dict:
    """A proxy as ``proxy list --json`` and the web API show it (its password masked)."""
    return {"id": p.id, "url": redact(p.url), "leased_to": list(p.leased_to), "last_error": p.last_error,
            "requests": p.requests, "refusals": p.refusals, "failed_at": p.failed_at}


def cmd_proxy_list(args, config, store) -> None:
    proxies = store.list_proxies()
    if args.json:
        for p in proxies:
            print_json(proxy_dict(p))
        return
    if not proxies:
        print("no proxies: workers fetch directly (add one with `monitor proxy add http://user:pass@host:port`)")
        return
    print(table(["ID", "URL", "LEASED TO", "LAST ERROR", "REQUESTS", "REFUSALS"],
                 [[str(p.id), redact(p.url), ", ".join(p.leased_to) or "-", (p.last_error or "-")[:60], str(p.requests),
                   str(p.refusals)] for p in proxies]))


def cmd_proxy_remove(args, config, store) -> None:
    proxy = _find_proxy(store, args.ref)
    store.remove_proxy(proxy.id)
    print(f"removed proxy {proxy.id}: {redact(proxy.url)}")


def try_proxy(config, proxy_url: str, page: str = TEST_PAGE) -> str:
    """Fetch ``page`` through a proxy: the line saying how it went, RuntimeFailure with it
    when it did not go well."""
    checked_page, _ = watch_url(page, config)
    _, outcome = _through(proxy_url, checked_page, config)
    if not outcome.startswith("ok"):
        raise RuntimeFailure(outcome)
    return outcome


def cmd_proxy_test(args, config, store) -> None:
    proxy_url = _find_proxy(store, args.ref).url if parse_id(args.ref) is not None else _proxy_url(args.ref)
    print(try_proxy(config, proxy_url, args.page))


# --- the host disable list -----------------------------------------------------------------------
def cmd_hosts(args, config, store) -> None:
    now = time.time()
    cooldowns = store.host_cooldowns(now)
    if args.json:
        for c in cooldowns:
            print_json(dataclasses.asdict(c))
        return
    if not cooldowns:
        print("no host is disabled")
        return
    print(table(["HOST", "UNTIL", "LEFT", "IN A ROW", "WHY", "EXITS REFUSED", "REPORTED BY"],
                [[c.host, ts(c.until), f"{max(1, round((c.until - now) / 60))}m", str(c.strikes), c.reason, c.exits,
                  c.worker]
                 for c in cooldowns]))
    print("lift one at once, fleet-wide: `monitor hosts enable HOST`")


def enable_host(config, store: Store, host: str) -> str:
    """Lift a host's cooldown now, in the store and in every running worker; the host as
    the disable list writes it. NotFound when it is not disabled; RuntimeFailure when the
    workers could not be told (it is off the list then, but they skip it until it ends)."""
    host = host.strip().lower().rstrip(".")
    if not host:
        raise UsageError("give the host name to enable, as `monitor hosts` lists it")
    if not store.enable_host(host, time.time()):
        raise NotFound(f"{host} is not disabled (`monitor hosts` lists those that are)")
    try:  # running workers learn it at once; workers that start later never see the cooldown
        connection = amqp.connect(config, get_logger("cli"), attempts=2)
        try:
            amqp.publish(amqp.open_channel(connection, config), "",
                         HostDisabled(host, 0.0, "enabled by an operator", "cli").to_bytes(), exchange=amqp.HOST_EVENTS)
        finally:
            connection.close()
    except (amqp.BrokerUnavailable, amqp.PublishFailed, *amqp.RECOVERABLE) as exc:
        raise RuntimeFailure(f"{host} is off the disable list, but running workers were not told "
                             f"({describe(exc)}): they skip it until its cooldown ends") from None
    return host


def cmd_hosts_enable(args, config, store) -> None:
    print(f"{enable_host(config, store, args.host)} enabled: every worker may fetch it again now")


def cmd_workers(args, config, store) -> None:
    workers = store.list_workers()
    now = time.time()
    if args.json:
        for w in workers:
            print_json(dataclasses.asdict(w))
        return
    if not workers:
        print("no worker has sent a heartbeat yet")
        return
    print(table(["ID", "HOST", "PID", "STATE", "LAST HEARTBEAT", "JOBS", "ERRORS", "PROXIES", "CURRENT JOB"],
                 [[w.id, w.host, str(w.pid), w.state, format_age(now - w.last_heartbeat), str(w.jobs_done), str(w.errors),
                   ",".join(map(str, w.proxies)) or "-", w.current_job or "-"] for w in workers]))

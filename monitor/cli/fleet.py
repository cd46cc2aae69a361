"""The worker fleet: ``monitor proxy ...`` (the VPN exits) and ``monitor workers``."""
from __future__ import annotations

import dataclasses
import time
from urllib.parse import urlsplit

from monitor.check import check_page
from monitor.cli.common import RuntimeFailure, UsageError, print_json, table, watch_url
from monitor.durations import format_age
from monitor.messages import Job
from monitor.store import Duplicate, NotFound, Store, parse_id
from monitor.urls import redact

# --- proxies and workers -----------------------------------------------------------------------
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def _proxy_url(url: str) -> str:
    parts = urlsplit((url or "").strip())
    if parts.scheme.lower() not in PROXY_SCHEMES:
        raise UsageError(f"{redact(url)!r}: a proxy URL starts with one of {', '.join(s + '://' for s in PROXY_SCHEMES)}")
    try:
        if not parts.hostname or not parts.port:
            raise ValueError
    except ValueError:
        raise UsageError(f"{redact(url)!r}: a proxy URL needs a host and a port, e.g. http://user:pass@10.0.0.5:3128") from None
    return url.strip()


def _find_proxy(store: Store, ref: str):
    proxy_id = parse_id(ref)
    if proxy_id is not None:
        try:
            return store.get_proxy(proxy_id)
        except NotFound as exc:
            raise UsageError(str(exc)) from None
    for proxy in store.list_proxies():
        if proxy.url == ref:
            return proxy
    raise UsageError(f"no proxy {redact(ref)} in the pool")


def cmd_proxy_add(args, config, store) -> None:
    url = _proxy_url(args.url)
    try:
        proxy = store.add_proxy(url)
    except Duplicate as exc:
        raise UsageError(str(exc)) from None
    print(f"added proxy {proxy.id}: {redact(proxy.url)}")


def cmd_proxy_list(args, config, store) -> None:
    proxies = store.list_proxies()
    if args.json:
        for p in proxies:
            print_json({"id": p.id, "url": redact(p.url), "leased_to": list(p.leased_to), "last_error": p.last_error,
                         "requests": p.requests, "refusals": p.refusals, "failed_at": p.failed_at})
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


def cmd_proxy_test(args, config, store) -> None:
    proxy_url = _find_proxy(store, args.ref).url if parse_id(args.ref) is not None else _proxy_url(args.ref)
    page, _ = watch_url(args.page, config)
    task = check_page(Job(page, 0), config, proxy=proxy_url)
    if task.status != "ok":
        raise RuntimeFailure(f"failed through {redact(proxy_url)}: {task.error}")
    print(f"ok through {redact(proxy_url)}: {page} answered HTTP {task.http_status} with {len(task.context)} links "
          f"in {task.elapsed_ms} ms")


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

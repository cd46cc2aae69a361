"""The REST API under ``/api/v1/`` (JSON), described by ``/api/v1/openapi.json``.

Every route does what a ``monitor`` command does, through the same functions: the CLI's
checks (:mod:`monitor.cli.common`, :mod:`monitor.cli.watches` and the other command
modules) raise ``UsageError`` with a one-line reason, answered here as 400 ``{"error": ...}``
before anything is changed; an unknown watch, filter, sink, proxy or disabled host in the
path is 404. A broker that cannot be reached is 503; a test through a sink or a proxy
that fails out there is 502 (the web front worked, what it was asked to reach did not).
Objects are shown as the commands' ``--json`` shows them (passwords and secrets masked).
Long lists take ``limit`` and ``offset``. The sinks and filters the TOML file declares are
the notifier's to apply (see :mod:`monitor.cli.filters`); removing one is refused here as
by the CLI. Keep :mod:`monitor.web.openapi` in step with the routes.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import re
import time

from flask import Blueprint, Response, g, jsonify, request
from flask.typing import ResponseReturnValue

from monitor.cli import positive_int
from monitor.cli.common import RuntimeFailure, UsageError, watch_id_of
from monitor.cli.filters import add_filter, filter_dict, remove_filter
from monitor.cli.fleet import TEST_PAGE, add_proxy, enable_host, proxy_dict, try_proxy
from monitor.cli.operations import dead_letter_dict, dead_letters, purge_dead_letters
from monitor.cli.operations import replay_dead_letters as replay_letters  # (the route below has its name)
from monitor.cli.sinks import add_sink, remove_sink, retry_deliveries, send_test_alert, sink_dict, sink_options
from monitor.cli.watches import (
    add_watch,
    alerts_since,
    apply_changes,
    checked_changes,
    export_watches,
    import_rows,
    import_watches,
    watch_dict,
)
from monitor.store import MAX_ID, NotFound, parse_id
from monitor.urls import scrub_credentials
from monitor.web import openapi
from monitor.web.app import store

blueprint = Blueprint("api", __name__, url_prefix=openapi.PREFIX)

MAX_IMPORT = 10_000  # entries of one import request
# A Unix time (``since=1700000000``): a bare number is never a duration, which needs a unit.
_EPOCH = re.compile(r"^[0-9]{1,12}(\.[0-9]{1,9})?$", re.ASCII)


# --- errors: one line, nothing changed -------------------------------------------------------------
def _error(status: int, exc: Exception) -> ResponseReturnValue:
    return jsonify(error=scrub_credentials(" ".join(str(exc).split()))), status


@blueprint.errorhandler(UsageError)
def _bad_input(exc: UsageError) -> ResponseReturnValue:
    return _error(400, exc)


@blueprint.errorhandler(NotFound)
def _not_found(exc: NotFound) -> ResponseReturnValue:
    return _error(404, exc)


@blueprint.errorhandler(RuntimeFailure)
def _unavailable(exc: RuntimeFailure) -> ResponseReturnValue:
    return _error(503, exc)


# --- reading the request ---------------------------------------------------------------------------
def _body(allowed: set[str], optional: bool = False) -> dict:
    """The request's JSON object; UsageError unless it is one with only ``allowed`` fields
    (a misspelt field would otherwise be ignored without a word). With ``optional``, no
    body at all is an empty object."""
    if optional and not request.get_data():
        return {}
    try:
        body = request.get_json(force=True, silent=True)
    except RecursionError:  # ("[[[[..." nested past Python's limit: not a body anyone means)
        body = None
    if not isinstance(body, dict):
        raise UsageError('the body must be a JSON object, e.g. {"url": "https://example.org/"}')
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise UsageError(f"unknown field {unknown[0][:40]!r}: one of {', '.join(sorted(allowed))}")
    return body


def _string(body: dict, field: str, required: bool = False) -> str | None:
    value = body.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{field}: a string is required" if required else f"{field}: a string or null is expected")
    return _no_nul(field, value)


def _strings(body: dict, field: str) -> list[str] | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{field}: a list of strings is expected")
    return [_no_nul(field, item) for item in value]


def _no_nul(field: str, value: str) -> str:
    """A string of the body as a command line could have given it: without NUL."""
    if "\x00" in value:
        raise UsageError(f"{field}: a NUL character (\\u0000) is not allowed")
    return value


def _duration(body: dict, field: str) -> str | None:
    """A duration as the CLI takes it (``5m``); whole seconds are written as such, so the
    CLI's rules (at least 1s, at most 366d) judge both."""
    value = body.get(field)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value}s"
    if value is None or isinstance(value, str):
        return value
    raise UsageError(f"{field}: write a number and a unit, e.g. 30s, 5m, 2h, 1d (or whole seconds)")


def _flag(body: dict, field: str, default: bool) -> bool:
    value = body.get(field, default)
    if not isinstance(value, bool):
        raise UsageError(f"{field}: true or false is expected")
    return value


def _watch_ref(body: dict) -> str | None:
    """``watch``: a watch's id (a number or its digits) or its URL, as ``--watch`` takes it."""
    value = body.get("watch")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _string(body, "watch")


def _headers(body: dict) -> dict[str, str] | None:
    """``headers``: an object of header names and values (the channel checks each)."""
    value = body.get("headers")
    if value is not None and not isinstance(value, dict):
        raise UsageError('headers: an object is expected, e.g. {"Authorization": "Bearer ..."}')
    return value


def _ids_or_all(body: dict, what: str) -> list[str] | None:
    """``ids`` (a list of them), or None for ``"all": true``; one of the two is required."""
    ids, everything = _strings(body, "ids"), _flag(body, "all", False)
    if everything == bool(ids):
        raise UsageError(f'give "ids": [{what} IDs] or "all": true')
    return None if everything else ids


def _tag(body: dict) -> str | None:
    """``tag``, or ``tags`` with at most one (the store keeps one tag per watch)."""
    if "tag" in body and "tags" in body:
        raise UsageError("give tag or tags, not both")
    tags = _strings(body, "tags")
    if tags is None:
        return _string(body, "tag")
    if len(tags) > 1:
        raise UsageError("tags: a watch has at most one tag")
    return tags[0] if tags else None


def _since(text: str) -> float:
    """``since=``: a duration back from now (as ``monitor alerts --since``) or a Unix time."""
    return float(text) if _EPOCH.match(text) else alerts_since(text)


def _limit(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"limit: {exc}") from None


def _offset(text: str | None) -> int:
    number = parse_id(text or "0")
    if number is None:
        raise UsageError(f"offset: {text[:40]!r} is not a whole number (0 or more)")
    return min(number, MAX_ID)  # (past any list; SQLite takes no larger number)


def _window() -> tuple[int, int]:
    """The ``offset`` (0 without one) and ``limit`` (-1: to the end, as SQLite writes it)
    query parameters."""
    limit = _limit(request.args.get("limit"))
    return _offset(request.args.get("offset")), -1 if limit is None else min(limit, MAX_ID)


# --- watches ---------------------------------------------------------------------------------------
@blueprint.get("/watches")
def list_watches() -> ResponseReturnValue:
    """The watches with their last results, by id (``monitor watch list --json``); ``q``:
    those with it in their URL, name or tag, as the dashboard's search."""
    offset, limit = _window()
    watches = store().list_watches(request.args.get("q", "").strip(), limit, offset)
    return jsonify([watch_dict(watch) for watch in watches])


@blueprint.post("/watches")
def create_watch() -> ResponseReturnValue:
    """Add a watch (``monitor watch add``): 201 and the watch, or 400 and nothing added."""
    body = _body({"url", "interval", "name", "tag", "tags", "selector", "ignore_params"})
    watch, warning = add_watch(g.config, store(), _string(body, "url", required=True), _duration(body, "interval"),
                               _string(body, "name"), _tag(body), _string(body, "selector"),
                               _strings(body, "ignore_params"))
    shown = watch_dict(watch)
    if warning:
        shown["warning"] = warning
    return jsonify(shown), 201


@blueprint.get("/watches/<int:watch_id>")
def get_watch(watch_id: int) -> ResponseReturnValue:
    return jsonify(watch_dict(store().get_watch_with_counts(watch_id)))


@blueprint.patch("/watches/<int:watch_id>")
def change_watch(watch_id: int) -> ResponseReturnValue:
    """Change what ``monitor watch set|enable|disable`` changes; all is checked first."""
    store().get_watch(watch_id)  # an unknown watch is 404 whatever the body says
    body = _body({"interval", "enabled", "selector", "ignore_params", "forget_volatile", "name", "tag"})
    if not body:
        raise UsageError("nothing to change: give interval, enabled, selector, ignore_params, forget_volatile, "
                         "name or tag")
    enabled, forget = body.get("enabled"), body.get("forget_volatile")
    if enabled is not None and not isinstance(enabled, bool):
        raise UsageError("enabled: true or false is expected")
    if forget not in (None, True):
        raise UsageError("forget_volatile: only true is meaningful")
    # (A null name or tag leaves it as it is; "" clears it, as `watch set --name ""` does.)
    changes = checked_changes(g.config, _duration(body, "interval"), _string(body, "selector"),
                              _strings(body, "ignore_params"), _string(body, "name"), _string(body, "tag"))
    apply_changes(store(), watch_id, changes, enabled, bool(forget))
    return jsonify(watch_dict(store().get_watch_with_counts(watch_id)))


@blueprint.delete("/watches/<int:watch_id>")
def remove_watch(watch_id: int) -> ResponseReturnValue:
    """Stop watching (``monitor watch remove``): its links and alerts go too."""
    store().remove_watch(watch_id)
    return jsonify(removed=watch_id)


@blueprint.post("/watches/<int:watch_id>/recheck")
def recheck_watch(watch_id: int) -> ResponseReturnValue:
    """Check now, as ``monitor watch recheck``: the watch is made due and the scheduler
    queues it within its tick (with its validators), never a second job beside one in flight."""
    store().get_watch(watch_id)
    busy = store().make_due([watch_id], time.time())
    return jsonify(id=watch_id, in_flight=bool(busy)), 202


@blueprint.get("/watches/<int:watch_id>/links")
def list_links(watch_id: int) -> ResponseReturnValue:
    """The links known for a watch, newest first (``monitor links --json``)."""
    store().get_watch(watch_id)
    offset, limit = _window()
    links = store().links(watch_id, limit, offset)
    return jsonify([{"watch_id": watch_id, **dataclasses.asdict(link)} for link in links])


@blueprint.get("/watches/export")
def export_watch_list() -> ResponseReturnValue:
    """The watch list as CSV, as ``monitor watch export`` prints it (import reads it back)."""
    out = io.StringIO()
    export_watches(store(), out)
    return Response(out.getvalue(), mimetype="text/csv")


@blueprint.post("/watches/import")
def import_watch_list() -> ResponseReturnValue:
    """Add watches from the file that is the body (``monitor watch import``): the formats it
    reads, ``format`` as ``--format``; the counts it prints and its lines about single entries."""
    rows = import_rows(request.get_data(), "the body", request.args.get("format", "auto"))
    if len(rows) > MAX_IMPORT:  # (each entry is checked, DNS included, while the request waits)
        raise UsageError(f"{len(rows)} entries: at most {MAX_IMPORT} a request (split the file, or use "
                         "`monitor watch import`); nothing added")
    imported = import_watches(g.config, store(), rows)
    return jsonify(added=imported.added, skipped=imported.duplicates, refused=imported.invalid,
                   messages=imported.messages)


# --- rules that hold back alerts -----------------------------------------------------------------
@blueprint.get("/filters")
def list_filters() -> ResponseReturnValue:
    """The rules, the TOML file's among them (``monitor filter list --json``)."""
    declared = store().declared_filter_ids()
    return jsonify([filter_dict(rule, declared) for rule in store().list_filters()])


@blueprint.post("/filters")
def create_filter() -> ResponseReturnValue:
    """Add a rule for one watch, one tag or every watch (``monitor filter add``): 201 and the rule."""
    body = _body({"rule", "pattern", "watch", "tag"})
    rule = add_filter(store(), _string(body, "rule", required=True), _string(body, "pattern"),
                      _watch_ref(body), _string(body, "tag"))
    return jsonify(filter_dict(rule, set())), 201


@blueprint.delete("/filters/<int:filter_id>")
def delete_filter(filter_id: int) -> ResponseReturnValue:
    """Remove a rule (``monitor filter remove``); one the TOML file declares is refused (400)."""
    remove_filter(store(), filter_id)
    return jsonify(removed=filter_id)


# --- what the watches found --------------------------------------------------------------------------
@blueprint.get("/alerts")
def list_alerts() -> ResponseReturnValue:
    """Alerts, oldest first, of one watch (id or URL) and/or since a time (``monitor alerts --json``)."""
    watch = request.args.get("watch")
    since = request.args.get("since")
    watch_id = watch_id_of(store(), watch) if watch else None
    offset, limit = _window()
    return jsonify([alert for _, alert in store().alerts(_since(since) if since else 0.0, watch_id, limit=limit,
                                                         offset=offset)])


@blueprint.get("/alerts/failed")
def list_failed_deliveries() -> ResponseReturnValue:
    """Deliveries given up on, oldest first, of every sink or ``sink`` (``alerts failed --json``)."""
    offset, limit = _window()
    return jsonify(store().failed_deliveries(request.args.get("sink") or None, limit, offset))


@blueprint.post("/alerts/retry")
def retry_failed_deliveries() -> ResponseReturnValue:
    """Make failed deliveries pending again (``monitor alerts retry``): ``ids`` or ``all``, of ``sink``."""
    body = _body({"ids", "all", "sink"})
    ids = _ids_or_all(body, "alert")
    return jsonify(pending_again=retry_deliveries(store(), ids, _string(body, "sink")))


# --- the fleet and delivery --------------------------------------------------------------------------
@blueprint.get("/proxies")
def list_proxies() -> ResponseReturnValue:
    return jsonify([proxy_dict(proxy) for proxy in store().list_proxies()])


@blueprint.post("/proxies")
def create_proxy() -> ResponseReturnValue:
    """Add a proxy (``monitor proxy add``): tested first by fetching ``page`` through it,
    unless ``"test": false``; one that does not work is refused (400) and not added."""
    body = _body({"url", "test", "page"})
    proxy, warning = add_proxy(g.config, store(), _string(body, "url", required=True), _flag(body, "test", True),
                               _string(body, "page") or TEST_PAGE)
    shown = proxy_dict(proxy)
    if warning:
        shown["warning"] = warning
    return jsonify(shown), 201


@blueprint.delete("/proxies/<int:proxy_id>")
def delete_proxy(proxy_id: int) -> ResponseReturnValue:
    """Remove a proxy from the pool (``monitor proxy remove``)."""
    store().remove_proxy(proxy_id)
    return jsonify(removed=proxy_id)


@blueprint.post("/proxies/<int:proxy_id>/test")
def proxy_test(proxy_id: int) -> ResponseReturnValue:
    """Fetch ``page`` through a proxy (``monitor proxy test``); 502 with the reason when it fails."""
    body = _body({"page"}, optional=True)
    proxy = store().get_proxy(proxy_id)
    try:
        outcome = try_proxy(g.config, proxy.url, _string(body, "page") or TEST_PAGE)
    except RuntimeFailure as exc:
        return _error(502, exc)
    return jsonify(id=proxy_id, outcome=outcome)


@blueprint.get("/workers")
def list_workers() -> ResponseReturnValue:
    return jsonify([dataclasses.asdict(worker) for worker in store().list_workers()])


@blueprint.get("/hosts")
def list_disabled_hosts() -> ResponseReturnValue:
    return jsonify([dataclasses.asdict(cooldown) for cooldown in store().host_cooldowns(time.time())])


@blueprint.post("/hosts/<host>/enable")
def enable_disabled_host(host: str) -> ResponseReturnValue:
    """Lift a host's cooldown now, in every worker (``monitor hosts enable``); 404 when it is
    not disabled, 503 when it is lifted but the running workers could not be told."""
    return jsonify(enabled=enable_host(g.config, store(), host))


@blueprint.get("/sinks")
def list_sinks() -> ResponseReturnValue:
    """The sinks in the store (the notifier applies the TOML file's declarations to it)."""
    return jsonify([sink_dict(sink) for sink in store().list_sinks()])


@blueprint.post("/sinks")
def create_sink() -> ResponseReturnValue:
    """Deliver the alerts of one watch, one tag or every watch to a channel (``monitor sink add``)."""
    body = _body({"kind", "target", "name", "secret", "headers", "digest", "watch", "tag"})
    options = sink_options(_string(body, "secret"), _headers(body), _duration(body, "digest"))
    sink = add_sink(store(), _string(body, "kind", required=True), _string(body, "target", required=True),
                    _string(body, "name"), options, _watch_ref(body), _string(body, "tag"))
    return jsonify(sink_dict(sink)), 201


@blueprint.delete("/sinks/<name>")
def delete_sink(name: str) -> ResponseReturnValue:
    """Stop delivering to a sink (``monitor sink remove``); one the TOML file declares is refused (400)."""
    remove_sink(store(), name)
    return jsonify(removed=name)


@blueprint.post("/sinks/<name>/test")
def sink_test(name: str) -> ResponseReturnValue:
    """Send one test alert now (``monitor sink test``); 502 with the reason when it is not delivered."""
    try:
        sink = send_test_alert(store(), name)
    except RuntimeFailure as exc:
        return _error(502, exc)
    return jsonify(sink=sink.name, delivered=True)


@blueprint.get("/dead-letters")
def list_dead_letters() -> ResponseReturnValue:
    """The dead letters, oldest first; browsing leaves them in the queue."""
    with dead_letters(g.config) as dlq:
        return jsonify([dead_letter_dict(letter) for letter in dlq.list()])


@blueprint.post("/dead-letters/replay")
def replay_dead_letters() -> ResponseReturnValue:
    """Publish dead letters back to their queue (``monitor dlq replay``): ``ids`` or ``all``."""
    ids = _ids_or_all(_body({"ids", "all"}), "dead-letter")
    replayed, missing = replay_letters(g.config, None if ids is None else set(ids))
    return jsonify(replayed=replayed, missing=missing)


@blueprint.post("/dead-letters/purge")
def purge_dead_letter_queue() -> ResponseReturnValue:
    """Delete every dead letter (``monitor dlq purge``)."""
    return jsonify(purged=purge_dead_letters(g.config))


@blueprint.get("/openapi.json")
def openapi_document() -> ResponseReturnValue:
    return jsonify(openapi.document())

"""The REST API under ``/api/v1/`` (JSON), described by ``/api/v1/openapi.json``.

Every route does what a ``monitor`` command does, through the same functions: the CLI's
checks (:mod:`monitor.cli.common`, :mod:`monitor.cli.watches`) raise ``UsageError`` with a
one-line reason, answered here as 400 ``{"error": ...}`` before anything is changed; an
unknown watch in the path is 404. Objects are shown as the commands' ``--json`` shows them
(passwords and secrets masked). Keep :mod:`monitor.web.openapi` in step with the routes.
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import time

from flask import Blueprint, g, jsonify, request
from flask.typing import ResponseReturnValue

from monitor.cli import positive_int
from monitor.cli.common import RuntimeFailure, UsageError, watch_id_of
from monitor.cli.fleet import proxy_dict
from monitor.cli.operations import dead_letter_dict, dead_letters
from monitor.cli.operations import replay_dead_letters as replay_letters  # (the route below has its name)
from monitor.cli.sinks import sink_dict
from monitor.cli.watches import add_watch, alerts_since, checked_changes, watch_dict
from monitor.store import NotFound
from monitor.web import openapi
from monitor.web.app import store

blueprint = Blueprint("api", __name__, url_prefix=openapi.PREFIX)

# A Unix time (``since=1700000000``): a bare number is never a duration, which needs a unit.
_EPOCH = re.compile(r"^[0-9]{1,12}(\.[0-9]{1,9})?$", re.ASCII)


# --- errors: one line, nothing changed -------------------------------------------------------------
def _error(status: int, exc: Exception) -> ResponseReturnValue:
    return jsonify(error=" ".join(str(exc).split())), status


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
def _body(allowed: set[str]) -> dict:
    """The request's JSON object; UsageError unless it is one with only ``allowed`` fields
    (a misspelt field would otherwise be ignored without a word)."""
    body = request.get_json(force=True, silent=True)
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
    return value


def _strings(body: dict, field: str) -> list[str] | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{field}: a list of strings is expected")
    return value


def _interval(body: dict) -> str | None:
    """The interval as the CLI takes it (``5m``); whole seconds are written as such, so the
    CLI's rules (at least 1s, at most 366d) judge both."""
    value = body.get("interval")
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value}s"
    if value is None or isinstance(value, str):
        return value
    raise UsageError("interval: write a number and a unit, e.g. 30s, 5m, 2h, 1d (or whole seconds)")


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


# --- watches ---------------------------------------------------------------------------------------
@blueprint.get("/watches")
def list_watches() -> ResponseReturnValue:
    """Every watch with its last results (``monitor watch list --json``)."""
    return jsonify([watch_dict(watch) for watch in store().list_watches()])


@blueprint.post("/watches")
def create_watch() -> ResponseReturnValue:
    """Add a watch (``monitor watch add``): 201 and the watch, or 400 and nothing added."""
    body = _body({"url", "interval", "name", "tag", "tags", "selector", "ignore_params"})
    watch, warning = add_watch(g.config, store(), _string(body, "url", required=True), _interval(body),
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
    interval_s, selector, params, name, tag = checked_changes(
        g.config, _interval(body), _string(body, "selector"), _strings(body, "ignore_params"),
        _string(body, "name"), _string(body, "tag"))
    # The same calls, in the same order, as `monitor watch set`.
    if forget:
        store().forget_volatile_params(watch_id)
    if params is not None:
        store().set_ignore_params(watch_id, params)
    if interval_s is not None or enabled is not None or name is not None or tag is not None:
        store().update_watch(watch_id, enabled=enabled, interval_s=interval_s, name=name, tag=tag)
    if selector is not None:
        store().set_selector(watch_id, selector)
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
    links = store().links(watch_id, _limit(request.args.get("limit")))
    return jsonify([{"watch_id": watch_id, **dataclasses.asdict(link)} for link in links])


# --- what the watches found --------------------------------------------------------------------------
@blueprint.get("/alerts")
def list_alerts() -> ResponseReturnValue:
    """Alerts, oldest first, of one watch (id or URL) and/or since a time (``monitor alerts --json``)."""
    watch = request.args.get("watch")
    since = request.args.get("since")
    watch_id = watch_id_of(store(), watch) if watch else None
    return jsonify([alert for _, alert in store().alerts(_since(since) if since else 0.0, watch_id)])


# --- the fleet and delivery --------------------------------------------------------------------------
@blueprint.get("/proxies")
def list_proxies() -> ResponseReturnValue:
    return jsonify([proxy_dict(proxy) for proxy in store().list_proxies()])


@blueprint.get("/workers")
def list_workers() -> ResponseReturnValue:
    return jsonify([dataclasses.asdict(worker) for worker in store().list_workers()])


@blueprint.get("/hosts")
def list_disabled_hosts() -> ResponseReturnValue:
    return jsonify([dataclasses.asdict(cooldown) for cooldown in store().host_cooldowns(time.time())])


@blueprint.get("/sinks")
def list_sinks() -> ResponseReturnValue:
    """The sinks in the store (the notifier applies the TOML file's declarations to it)."""
    return jsonify([sink_dict(sink) for sink in store().list_sinks()])


@blueprint.get("/dead-letters")
def list_dead_letters() -> ResponseReturnValue:
    """The dead letters, oldest first; browsing leaves them in the queue."""
    with dead_letters(g.config) as dlq:
        return jsonify([dead_letter_dict(letter) for letter in dlq.list()])


@blueprint.post("/dead-letters/replay")
def replay_dead_letters() -> ResponseReturnValue:
    """Publish dead letters back to their queue (``monitor dlq replay``): ``ids`` or ``all``."""
    body = _body({"ids", "all"})
    ids, everything = _strings(body, "ids"), body.get("all", False)
    if not isinstance(everything, bool) or everything == bool(ids):
        raise UsageError('give "ids": [dead-letter IDs] or "all": true')
    replayed, missing = replay_letters(g.config, None if everything else set(ids))
    return jsonify(replayed=replayed, missing=missing)


@blueprint.get("/openapi.json")
def openapi_document() -> ResponseReturnValue:
    return jsonify(openapi.document())

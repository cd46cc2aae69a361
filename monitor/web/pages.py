"""The dashboard: server-rendered pages that work without JavaScript.

* ``/`` (and ``/alerts``): the newest alerts, filterable by watch and tag; a small script
  (``static/live.js``) polls ``/alerts/rows`` for rows newer than the last one shown and
  puts them on top, so the page is live without reloading. Without JavaScript it is a
  plain page (reload to see more).
* ``/watches``: the watch list, a search, and the forms that change it;
  ``/watches/<id>``: one watch, its links, its feed, the filters that apply to it (its
  own, its tag's, every watch's) and a form to add or remove its own; ``/fleet``: queue
  depths, workers, proxies and the host disable list.

Forms are POSTs carrying the CSRF token (the application checks it before any view runs;
this blueprint sets the cookie it is derived from). A success redirects (303, so a reload
never posts twice); bad input re-renders the page with the one-line error the CLI would
print, and nothing changes. The validation is the CLI's own code (:mod:`monitor.cli.common`,
:func:`monitor.cli.watches.add_watch`, :func:`monitor.cli.filters.add_filter`), so the web
and the terminal refuse the same things.
"""
from __future__ import annotations

import time

from flask import Blueprint, Response, abort, g, jsonify, redirect, render_template, request, url_for

from monitor import amqp
from monitor import store as stores
from monitor.cli.common import RuntimeFailure, UsageError, checked_label, cost, interval_seconds, scope, ts
from monitor.cli.filters import add_filter as checked_add_filter
from monitor.cli.filters import remove_filter
from monitor.cli.fleet import enable_host
from monitor.cli.operations import dead_letters, gather_status, replay_dead_letters
from monitor.cli.watches import status_line  # the CLI's wording of a watch's status
from monitor.cli.watches import add_watch as checked_add_watch
from monitor.durations import format_age, format_duration
from monitor.filters import RULES, Rule
from monitor.store import Watch
from monitor.urls import redact
from monitor.web import auth
from monitor.web.app import store

# The templates and the static files (CSS, the live script) live in monitor/web/templates and
# monitor/web/static: the application's own folders, so Flask finds them without the
# blueprint declaring any (and /static is the application's ``static`` endpoint).
blueprint = Blueprint("pages", __name__)

ALERTS_SHOWN = 100  # rows of the alerts page; the live script adds to them
LINKS_SHOWN = 500  # known links listed on a watch's page (newest first)
WATCHES_SHOWN = 100  # watches per page of the watch list (a list may hold hundreds of thousands)
LETTERS_SHOWN = 50  # dead letters listed on the fleet page (oldest first), each with its replay button
COOKIE_MAX_AGE = 365 * 86400


# --- the CSRF cookie and what every template sees ----------------------------------------------
@blueprint.before_request
def _csrf_cookie() -> None:
    """The browser's CSRF cookie, or a new one (set on the response by :func:`_set_cookie`)."""
    g.csrf_cookie = request.cookies.get(auth.CSRF_COOKIE) or auth.new_csrf_cookie()


@blueprint.after_request
def _set_cookie(response: Response) -> Response:
    # Only when absent: changing it would make the forms of pages open in other tabs stale.
    # (No g.csrf_cookie when the application answered before this blueprint's views: a 401.)
    cookie = g.get("csrf_cookie")
    if cookie and request.cookies.get(auth.CSRF_COOKIE) != cookie:
        response.set_cookie(auth.CSRF_COOKIE, cookie, max_age=COOKIE_MAX_AGE, httponly=True,
                            samesite="Strict", path="/",  # (behind a TLS proxy, the proxy says https)
                            secure=request.is_secure or request.headers.get("X-Forwarded-Proto") == "https")
    return response


@blueprint.app_template_global()
def csrf_token() -> str:
    """The hidden ``csrf`` field's value for this browser's cookie."""
    return auth.csrf_token(g.key, g.csrf_cookie)


@blueprint.app_template_filter("when")
def _when(value: float | None) -> str:
    return ts(value)


@blueprint.app_template_filter("ago")
def _ago(value: float | None) -> str:
    return format_age(time.time() - value if value else None)


@blueprint.app_template_filter("duration")
def _duration(seconds: float) -> str:
    return format_duration(seconds)


@blueprint.app_template_filter("redact")
def _redact(url: str) -> str:
    return redact(url)


@blueprint.app_template_filter("cost")
def _cost(cost_ms: float | None) -> str:
    return cost(cost_ms)


def status_kind(watch: Watch) -> str:
    """ok, error, skipped, paused or new: the colour of a watch's status on the pages."""
    if not watch.enabled:
        return "paused"
    status = watch.last_status or ""
    if not status:
        return "new"
    if status.startswith("skipped"):
        return "skipped"
    # The processor writes "ok", "ok (<warning>)", "error: <reason>" or "skipped: <reason>".
    return "ok" if status.startswith("ok") else "error"


def _disabled_hosts() -> dict[str, str]:
    """Why each disabled host is disabled, in the words ``monitor watch list`` uses."""
    return {c.host: f"{c.reason}, {c.strikes} in a row" for c in store().host_cooldowns(time.time())}


def _watch_or_404(watch_id: int) -> Watch:
    try:
        return store().get_watch(watch_id)
    except stores.NotFound as exc:
        abort(404, str(exc))


# --- alerts ----------------------------------------------------------------------------------
def _alert_filters() -> tuple[int | None, str | None]:
    """The ``watch`` and ``tag`` query parameters (blank: no filter); a bad watch is a UsageError."""
    watch = request.args.get("watch", "").strip()
    tag = request.args.get("tag", "").strip() or None
    if not watch:
        return None, tag
    watch_id = stores.parse_id(watch)
    if watch_id is None or watch_id > stores.MAX_ID:
        raise UsageError(f"no watch with id {watch[:30]}")
    return watch_id, tag


@blueprint.get("/")
@blueprint.get("/alerts")
def alerts():
    """The newest alerts across all watches (or one watch, or one tag)."""
    try:
        watch_id, tag = _alert_filters()
    except UsageError as exc:
        return render_template("alerts.html", error=str(exc), alerts=[], last=0, tags=store().tags(),
                               watch_id=None, tag=None), 400
    # Read the last rowid before the rows: an alert recorded in between is then fetched
    # twice at worst (the live script skips a row already shown), never missed.
    last = store().last_alert_rowid()
    rows = store().recent_alerts(ALERTS_SHOWN, watch_id, tag)
    return render_template("alerts.html", error=None, alerts=rows, last=last, tags=store().tags(),
                           watch_id=watch_id, tag=tag)


@blueprint.get("/alerts/rows")
def alert_rows():
    """What the live script asks every few seconds: the rows of the alerts recorded after
    ``after`` (same filters as the page), as HTML to put on top, and the new last rowid."""
    try:
        watch_id, tag = _alert_filters()
    except UsageError as exc:
        abort(400, str(exc))
    after = stores.parse_id(request.args.get("after", "0"))
    if after is None or after > stores.MAX_ID:
        abort(400, "after: the rowid of the last alert shown (a whole number)")
    last = store().last_alert_rowid()
    rows = [row for row in store().recent_alerts(ALERTS_SHOWN, watch_id, tag, after_rowid=after)
            if row["rowid"] <= last]
    return jsonify(last=max(last, after), count=len(rows),
                   html=render_template("_alert_rows.html", alerts=rows))


# --- the watch list --------------------------------------------------------------------------
def _watches_page(error: str | None = None, form: dict | None = None, status: int = 200):
    """One page of the watch list (``?page=``, ``WATCHES_SHOWN`` a page), or of the watches
    the search ``?q=`` finds in their URL, name or tag."""
    query = request.args.get("q", "").strip()
    pages = max(1, -(-store().count_watches(query) // WATCHES_SHOWN))
    page = min(max(request.args.get("page", 1, type=int), 1), pages)  # (a page past the end: the last one)
    watches = store().list_watches(query, WATCHES_SHOWN, (page - 1) * WATCHES_SHOWN)
    disabled = _disabled_hosts()
    rows = [(w, status_kind(w), status_line(w, disabled)) for w in watches]
    ids = [w.id for w in watches]
    return render_template("watches.html", rows=rows, q=query, error=error, form=form or {}, page=page, pages=pages,
                           sparks=store().check_outcomes(ids), per_day=store().alerts_per_day(ids, time.time()),
                           default_interval=format_duration(g.config.default_interval)), status


@blueprint.get("/watches")
def watches():
    return _watches_page()


@blueprint.post("/watches")
def add_watch():
    """The add form: ``monitor watch add``'s own checks and wording (a blank interval is the default)."""
    form = {name: request.form.get(name, "").strip() for name in ("url", "interval", "name", "tag")}
    try:
        # (Its warning, a host that does not resolve right now, is not fatal: each fetch checks again.)
        watch, _warning = checked_add_watch(g.config, store(), form["url"], form["interval"] or None,
                                            form["name"] or None, form["tag"] or None)
    except UsageError as exc:
        return _watches_page(str(exc), form, 400)
    return redirect(url_for("pages.watch", watch_id=watch.id), code=303)


def _back(watch_id: int):
    """Where a form on a watch's row or page goes after it is done: where it came from."""
    if request.form.get("back") == "list":
        return redirect(url_for("pages.watches"), code=303)
    return redirect(url_for("pages.watch", watch_id=watch_id), code=303)


@blueprint.post("/watches/<int:watch_id>/pause")
def pause(watch_id: int):
    _watch_or_404(watch_id)
    store().update_watch(watch_id, enabled=False)
    return _back(watch_id)


@blueprint.post("/watches/<int:watch_id>/resume")
def resume(watch_id: int):
    _watch_or_404(watch_id)
    store().update_watch(watch_id, enabled=True)
    return _back(watch_id)


@blueprint.post("/watches/<int:watch_id>/recheck")
def recheck(watch_id: int):
    """Due now, as ``monitor watch recheck``: the scheduler queues it within a tick."""
    _watch_or_404(watch_id)
    store().make_due([watch_id], time.time())
    return _back(watch_id)


@blueprint.post("/watches/<int:watch_id>/interval")
def set_interval(watch_id: int):
    _watch_or_404(watch_id)
    try:
        interval = interval_seconds(request.form.get("interval", "").strip(), g.config)
    except UsageError as exc:
        return _refused(watch_id, exc)
    store().update_watch(watch_id, interval_s=interval)
    return _back(watch_id)


@blueprint.post("/watches/<int:watch_id>/label")
def set_label(watch_id: int):
    """Rename or retag a watch (``monitor watch set --name --tag``'s checks; blank: none)."""
    _watch_or_404(watch_id)
    try:
        name, tag = (checked_label(field, request.form.get(field, "").strip()) for field in ("name", "tag"))
    except UsageError as exc:
        return _refused(watch_id, exc)
    store().update_watch(watch_id, name=name, tag=tag)
    return _back(watch_id)


def _refused(watch_id: int, exc: UsageError):
    """A watch's form refused: the page it came from again, with the one-line error (400)."""
    if request.form.get("back") == "list":
        return _watches_page(str(exc), status=400)
    return _watch_page(watch_id, str(exc), 400)


@blueprint.post("/watches/<int:watch_id>/remove")
def remove(watch_id: int):
    _watch_or_404(watch_id)
    store().remove_watch(watch_id)
    return redirect(url_for("pages.watches"), code=303)


# --- one watch -------------------------------------------------------------------------------
def _watch_page(watch_id: int, error: str | None = None, status: int = 200, form: dict | None = None):
    try:
        watch = store().get_watch_with_counts(watch_id)
    except stores.NotFound:
        abort(404, f"no watch with id {watch_id}")
    return render_template("watch.html", watch=watch, kind=status_kind(watch),
                           status=status_line(watch, _disabled_hosts()), error=error,
                           checks=store().recent_checks(watch_id),
                           links=store().links(watch_id, LINKS_SHOWN),
                           filters=_filters_of(watch), rules=RULES, form=form or {},
                           feed=url_for("feeds", name=f"watch-{watch_id}.atom")), status


def _filters_of(watch: Watch) -> list[tuple[Rule, str, bool]]:
    """The rules that apply to ``watch``: each with whose it is (in the CLI's words) and
    whether the TOML file declares it (then it is changed there, not on this page)."""
    declared = store().declared_filter_ids()
    return [(rule, scope(rule.watch_id, rule.tag), rule.id in declared)
            for rule in store().list_filters() if rule.applies_to(watch.id, watch.tag)]


@blueprint.get("/watches/<int:watch_id>")
def watch(watch_id: int):
    return _watch_page(watch_id)


@blueprint.post("/watches/<int:watch_id>/filters")
def add_filter(watch_id: int):
    """A rule for this watch only (``monitor filter add RULE PATTERN --watch ID``'s checks)."""
    _watch_or_404(watch_id)
    form = {name: request.form.get(name, "").strip() for name in ("rule", "pattern")}
    try:
        checked_add_filter(store(), form["rule"], form["pattern"], str(watch_id))
    except UsageError as exc:
        return _watch_page(watch_id, str(exc), 400, form)
    return _to_filters(watch_id)


@blueprint.post("/watches/<int:watch_id>/filters/<int:filter_id>/remove")
def remove_watch_filter(watch_id: int, filter_id: int):
    """Remove one of this watch's own rules (``monitor filter remove``; a declared one is refused)."""
    _watch_or_404(watch_id)
    if not any(rule.id == filter_id and rule.watch_id == watch_id for rule in store().list_filters()):
        abort(404, f"watch {watch_id} has no filter with id {filter_id}")
    try:
        remove_filter(store(), filter_id)
    except UsageError as exc:
        return _watch_page(watch_id, str(exc), 400)
    return _to_filters(watch_id)


def _to_filters(watch_id: int):
    """After a filter form: the watch's page, scrolled to its filters."""
    return redirect(url_for("pages.watch", watch_id=watch_id, _anchor="filters"), code=303)


# --- the fleet -------------------------------------------------------------------------------
@blueprint.get("/fleet")
def fleet(error: str | None = None, code: int = 200):
    """Queue depths (dead letters among them) and lag, workers, proxies (passwords masked, as
    the CLI shows them) and disabled hosts. The queues are what ``monitor status`` gathers: a
    broker that cannot be reached is said on the page, not an error of the page."""
    status = gather_status(g.config, store())
    queues = [(queue, status.queues.get(queue)) for queue in (amqp.JOB_QUEUE, amqp.TASK_QUEUE, amqp.DEAD_LETTER)]
    letters, letters_error = _dead_letters(status)
    return render_template("fleet.html", now=status.now, status=status, queues=queues, dead_letter=amqp.DEAD_LETTER,
                           workers=store().list_workers(), proxies=store().list_proxies(),
                           cooldowns=store().host_cooldowns(status.now), error=error or letters_error,
                           letters=letters, letters_shown=LETTERS_SHOWN, enabled=request.args.get("enabled"),
                           replayed=request.args.get("replayed", type=int)), code


@blueprint.post("/fleet/hosts/<host>/enable")
def enable(host: str):
    """Lift a host's cooldown now, in every worker (``monitor hosts enable``); a host that is
    not disabled is the page's 404, workers that could not be told its 503 (the host is off
    the list then, but they skip it until its cooldown ends)."""
    try:
        enabled = enable_host(g.config, store(), host)
    except stores.NotFound as exc:
        return fleet(str(exc), 404)
    except RuntimeFailure as exc:
        return fleet(str(exc), 503)
    return redirect(url_for("pages.fleet", enabled=enabled), code=303)


def _dead_letters(status) -> tuple[list, str | None]:
    """The oldest dead letters (browsed: they stay in the queue), or why they cannot be
    shown. The broker is asked only when ``monitor status`` counted some."""
    waiting = status.queues.get(amqp.DEAD_LETTER)
    if not waiting or not waiting[0]:
        return [], None
    try:
        with dead_letters(g.config) as dlq:
            return dlq.list(LETTERS_SHOWN), None
    except RuntimeFailure as exc:
        return [], f"dead letters not listed: {exc}"


@blueprint.post("/fleet/replay")
def replay():
    """Send one dead letter (the form's ``id``) or all of them back to the queue they died in
    (``monitor dlq replay``), then say how many went on the fleet page; a broker that cannot
    be reached is the page's error (503)."""
    letter = request.form.get("id", "").strip()
    try:
        replayed, _missing = replay_dead_letters(g.config, {letter} if letter else None)
    except RuntimeFailure as exc:
        return fleet(f"dead letters not replayed: {exc}", 503)
    return redirect(url_for("pages.fleet", replayed=len(replayed)), code=303)

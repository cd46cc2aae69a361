"""The Flask application of the web front (see :mod:`monitor.web`).

Every request passes :func:`_guard`: without a token, a loopback ``Host``; the token when one
is required; no change started by another site; and on a form post (a browser's POST that
is not to the API) the CSRF token. Every answer forbids framing (no click-jacking of the
buttons). Errors are one line: JSON ``{"error": ...}`` under ``/api/``, plain text
elsewhere. The store is opened per request (SQLite connections are not shared between
threads) and closed after it.
"""
from __future__ import annotations

from flask import Flask, Response, g, jsonify, request, send_from_directory
from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import IntegerConverter

from monitor import config as configuration
from monitor.homekey import HomeKey
from monitor.store import MAX_ID, Store, open_store
from monitor.web import auth

MAX_BODY = 16 * 1024 * 1024  # bytes of a request body (an import file is the largest): 413 past it
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


class _RowId(IntegerConverter):
    """``<int:...>`` in every route: an id past SQLite's largest is no row (404), never an
    error of the database."""

    def to_python(self, value: str) -> int:
        number = super().to_python(value)
        if number > MAX_ID:  # (not the converter's max=: past it, werkzeug answers 405 for the other methods)
            raise NotFound(f"no row has the id {value[:30]}...")
        return number


def store() -> Store:
    """The store of the request in hand (opened on first use)."""
    if "store" not in g:
        g.store = open_store(g.config.db_path)
    return g.store


def create_app(config: configuration.Config) -> Flask:
    """The web front of the home ``config`` describes."""
    app = Flask(__name__)
    app.url_map.converters["int"] = _RowId
    app.config["MONITOR"] = config
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    key = HomeKey.load(config.home)
    token = config.web_token or None

    @app.before_request
    def _guard():
        g.config = config
        g.key = key
        if not token and not auth.loopback_host(request.host):
            return _error(403, "without a token this web front answers to localhost only: set MONITOR_WEB_TOKEN "
                               "to serve it under another name")
        try:
            auth.check_token(token, request.headers.get("Authorization"))
        except auth.Unauthorized as exc:
            return _error(401, str(exc), {"WWW-Authenticate": 'Basic realm="monitor"'})
        # (Behind a reverse proxy that rewrites Host, the name the browser asked is X-Forwarded-Host.)
        asked = request.headers.get("X-Forwarded-Host", request.host).split(",")[0].strip()
        if request.method in UNSAFE and auth.cross_site(request.headers.get("Origin"),
                                                        request.headers.get("Sec-Fetch-Site"), asked):
            return _error(403, "a change asked by another site's page is refused")
        if request.method == "POST" and not request.path.startswith("/api/"):
            if not auth.csrf_ok(key, request.cookies.get(auth.CSRF_COOKIE), request.form.get("csrf")):
                return _error(403, "this form is out of date or not from this site: load the page again")
        return None

    @app.after_request
    def _no_framing(response: Response) -> Response:
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response

    @app.teardown_request
    def _close(_exc) -> None:
        opened = g.pop("store", None)
        if opened is not None:
            opened.close()

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        return _error(exc.code or 500, exc.description or exc.name)

    from monitor.web import api, metrics, pages

    for module in (api, pages, metrics):
        app.register_blueprint(module.blueprint)

    @app.get("/feeds/<path:name>")
    def feeds(name: str):
        """The Atom feeds the notifier writes (all.atom, watch-<id>.atom, tag-<tag>.atom)."""
        if not name.endswith(".atom"):
            raise NotFound("no such feed")
        return send_from_directory(config.feeds_dir, name, mimetype="application/atom+xml")

    return app


def _error(status: int, message: str, headers: dict | None = None) -> Response:
    """A one-line error: JSON under /api/, text elsewhere."""
    if request.path.startswith("/api/"):
        response = jsonify(error=message)
    else:
        response = Response(message + "\n", mimetype="text/plain")
    response.status_code = status
    response.headers.update(headers or {})
    return response

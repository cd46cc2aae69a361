"""The web front: a dashboard, a REST API, the Atom feeds and Prometheus metrics, over the
same store as the CLI, served by one supervised process (``web``).

* :mod:`monitor.web.app`: the Flask application, its blueprints and what every request
  passes through (the token, CSRF on forms, one-line JSON errors);
* :mod:`monitor.web.auth`: the API token and the CSRF token of forms;
* :mod:`monitor.web.server`: the process supervisord runs (waitress, a production WSGI
  server) on ``MONITOR_WEB_BIND``;
* :mod:`monitor.web.api`: ``/api/v1/...`` and its OpenAPI description;
* :mod:`monitor.web.pages`: the server-rendered pages;
* :mod:`monitor.web.metrics`: ``/metrics`` and ``/healthz``.
"""

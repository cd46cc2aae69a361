"""``/metrics`` for Prometheus and ``/healthz`` for whoever watches the watcher."""
from __future__ import annotations

from flask import Blueprint

blueprint = Blueprint("metrics", __name__)

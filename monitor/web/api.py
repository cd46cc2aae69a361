"""The REST API under ``/api/v1/`` (JSON), described by ``/api/v1/openapi.json``."""
from __future__ import annotations

from flask import Blueprint

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")

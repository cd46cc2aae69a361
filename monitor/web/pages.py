"""The dashboard: server-rendered pages that work without JavaScript."""
from __future__ import annotations

from flask import Blueprint

blueprint = Blueprint("pages", __name__)

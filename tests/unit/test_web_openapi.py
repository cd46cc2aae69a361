"""The OpenAPI description of /api/v1 and the API's routes stay in step."""
from __future__ import annotations

import re

import pytest

from monitor.config import Config
from monitor.web import openapi
from monitor.web.app import create_app

_IGNORED_METHODS = {"HEAD", "OPTIONS"}


@pytest.fixture
def app(tmp_path):
    return create_app(Config(home=tmp_path))


def _routes(app) -> set[tuple[str, str]]:
    """(OpenAPI path, method) of every route of the API blueprint."""
    routes = set()
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("api."):
            continue
        path = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule.rule).removeprefix(openapi.PREFIX)
        routes.update((path, method.lower()) for method in rule.methods - _IGNORED_METHODS)
    return routes


def _documented() -> set[tuple[str, str]]:
    return {(path, method) for path, item in openapi.document()["paths"].items()
            for method in item if method != "parameters"}


def test_every_route_is_documented_and_every_documented_operation_exists(app):
    routes = _routes(app)
    assert routes, "the API blueprint is registered"
    assert routes - _documented() == set(), "routes missing from monitor/web/openapi.py"
    assert _documented() - routes == set(), "operations documented but not routed"


def test_every_reference_resolves_and_path_parameters_are_declared():
    document = openapi.document()
    text = repr(document)
    for kind, name in re.findall(r"#/components/(\w+)/(\w+)", text):
        assert name in document["components"][kind], f"unresolved $ref {kind}/{name}"
    for path, item in document["paths"].items():
        declared = {p["name"] for p in item.get("parameters", [])}
        assert set(re.findall(r"{(\w+)}", path)) <= declared, path


def test_the_document_is_served(app):
    response = app.test_client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response.get_json()["openapi"].startswith("3.")
    assert set(response.get_json()["paths"]) == set(openapi.document()["paths"])

"""The OpenAPI 3 description of the REST API (served at ``/api/v1/openapi.json``).

Built by hand next to the routes of :mod:`monitor.web.api`: ``tests/unit/test_web_openapi.py``
fails when a route and this description disagree, so keep them in step.
"""
from __future__ import annotations

PREFIX = "/api/v1"


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _list_of(name: str, description: str) -> dict:
    return {"200": _json({"type": "array", "items": _ref(name)}, description)}


_ERRORS = {
    "400": {"$ref": "#/components/responses/BadInput"},
    "401": {"$ref": "#/components/responses/Unauthorized"},
}
_UNKNOWN_WATCH = {"404": {"$ref": "#/components/responses/NotFound"}}
_BROKER_DOWN = {"503": {"$ref": "#/components/responses/Unavailable"}}
_WATCH_ID = {"name": "watch_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}
_INTERVAL = {"oneOf": [{"type": "string", "example": "5m"}, {"type": "integer", "description": "seconds"}],
             "description": "how often to check: 30s, 5m, 2h, 1d (or whole seconds); at least 1s, at most 366d"}

_SCHEMAS = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}},
              "description": "one line saying what was wrong; nothing was changed"},
    "Watch": {"type": "object", "description": "a watch as `monitor watch list --json` shows it (password masked)",
              "properties": {
                  "id": {"type": "integer"}, "url": {"type": "string"}, "name": {"type": "string", "nullable": True},
                  "tag": {"type": "string", "nullable": True}, "interval": {"type": "string", "example": "5m"},
                  "enabled": {"type": "boolean"}, "last_check": {"type": "number", "nullable": True},
                  "last_status": {"type": "string", "nullable": True},
                  "last_elapsed_ms": {"type": "integer", "nullable": True},
                  "cost_ms": {"type": "number", "nullable": True}, "links_known": {"type": "integer"},
                  "new_links": {"type": "integer"}, "next_due": {"type": "number"}, "in_flight": {"type": "boolean"},
                  "selector": {"type": "string"}, "ignore_params": {"type": "array", "items": {"type": "string"}},
                  "volatile_params": {"type": "array", "items": {"type": "string"}},
                  "warning": {"type": "string", "description": "only on creation: the host does not resolve now"}}},
    "NewWatch": {"type": "object", "required": ["url"], "additionalProperties": False, "properties": {
        "url": {"type": "string", "example": "https://example.org/"},
        "interval": _INTERVAL,
        "name": {"type": "string", "nullable": True},
        "tag": {"type": "string", "nullable": True},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 1,
                 "description": "the same as tag (a watch has at most one tag); give tag or tags"},
        "selector": {"type": "string", "description": "CSS: only links inside the regions it matches"},
        "ignore_params": {"type": "array", "items": {"type": "string"},
                          "description": "query parameters its links are compared without"}}},
    "WatchChanges": {"type": "object", "minProperties": 1, "additionalProperties": False, "properties": {
        "interval": _INTERVAL,
        "enabled": {"type": "boolean"},
        "selector": {"type": "string", "description": "'' for the whole page; a change rechecks at once"},
        "ignore_params": {"type": "array", "items": {"type": "string"}},
        "forget_volatile": {"type": "boolean", "enum": [True],
                            "description": "compare links again with the parameters found to change every check"},
        "name": {"type": "string", "nullable": True, "maxLength": 200,
                 "description": "one line; '' for none, null leaves it as it is"},
        "tag": {"type": "string", "nullable": True, "maxLength": 200,
                "description": "one line; '' for none, null leaves it as it is"}}},
    "Link": {"type": "object", "properties": {
        "watch_id": {"type": "integer"}, "url": {"type": "string"}, "text": {"type": "string"},
        "code": {"type": "string"}, "first_seen": {"type": "number"}}},
    "Alert": {"type": "object", "properties": {
        "alert_id": {"type": "string"}, "watch_id": {"type": "integer"}, "baseUrl": {"type": "string"},
        "url": {"type": "string"}, "text": {"type": "string"}, "first_seen": {"type": "number"}}},
    "Proxy": {"type": "object", "properties": {
        "id": {"type": "integer"}, "url": {"type": "string", "description": "password masked"},
        "leased_to": {"type": "array", "items": {"type": "string"}}, "last_error": {"type": "string", "nullable": True},
        "requests": {"type": "integer"}, "refusals": {"type": "integer"},
        "failed_at": {"type": "number", "nullable": True}}},
    "Worker": {"type": "object", "properties": {
        "id": {"type": "string"}, "host": {"type": "string"}, "pid": {"type": "integer"}, "state": {"type": "string"},
        "started_at": {"type": "number"}, "last_heartbeat": {"type": "number"}, "jobs_done": {"type": "integer"},
        "errors": {"type": "integer"}, "current_job": {"type": "string", "nullable": True},
        "proxies": {"type": "array", "items": {"type": "integer"}}}},
    "DisabledHost": {"type": "object", "properties": {
        "host": {"type": "string"}, "until": {"type": "number"}, "reason": {"type": "string"},
        "since": {"type": "number"}, "strikes": {"type": "integer"}, "exits": {"type": "string"},
        "worker": {"type": "string"}}},
    "Sink": {"type": "object", "properties": {
        "name": {"type": "string"}, "kind": {"type": "string"}, "target": {"type": "string", "description": "secrets masked"},
        "watch_id": {"type": "integer", "nullable": True}, "tag": {"type": "string", "nullable": True},
        "digest": {"type": "integer", "nullable": True}, "declared": {"type": "boolean"},
        "delivered": {"type": "integer"}, "pending": {"type": "integer"}, "failed": {"type": "integer"},
        "failing_since": {"type": "number", "nullable": True}, "last_error": {"type": "string", "nullable": True}}},
    "DeadLetter": {"type": "object", "properties": {
        "id": {"type": "string"}, "queue": {"type": "string"}, "reason": {"type": "string"}, "body": {"type": "string"}}},
    "Replay": {"type": "object", "additionalProperties": False, "properties": {
        "ids": {"type": "array", "items": {"type": "string"}}, "all": {"type": "boolean"}},
        "description": "give ids or all: true"},
}

_PATHS = {
    "/watches": {
        "get": {"summary": "The watch list with its last results", "operationId": "listWatches",
                "responses": {**_list_of("Watch", "every watch"), **_ERRORS}},
        "post": {"summary": "Watch a homepage (as `monitor watch add`)", "operationId": "addWatch",
                 "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("NewWatch")}}},
                 "responses": {"201": _json(_ref("Watch"), "the watch added"), **_ERRORS}},
    },
    "/watches/{watch_id}": {
        "parameters": [_WATCH_ID],
        "get": {"summary": "One watch", "operationId": "getWatch",
                "responses": {"200": _json(_ref("Watch"), "the watch"), **_ERRORS, **_UNKNOWN_WATCH}},
        "patch": {"summary": "Change a watch (as `monitor watch set|enable|disable`)", "operationId": "changeWatch",
                  "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("WatchChanges")}}},
                  "responses": {"200": _json(_ref("Watch"), "the watch changed"), **_ERRORS, **_UNKNOWN_WATCH}},
        "delete": {"summary": "Stop watching; its links and alerts go too", "operationId": "removeWatch",
                   "responses": {"200": _json({"type": "object", "properties": {"removed": {"type": "integer"}}},
                                              "the watch removed"), **_ERRORS, **_UNKNOWN_WATCH}},
    },
    "/watches/{watch_id}/recheck": {
        "parameters": [_WATCH_ID],
        "post": {"summary": "Check now: the watch is due at once, the scheduler queues it within a second",
                 "operationId": "recheckWatch",
                 "responses": {"202": _json({"type": "object", "properties": {
                     "id": {"type": "integer"},
                     "in_flight": {"type": "boolean", "description": "a check was already under way"}}},
                     "the watch is due"), **_ERRORS, **_UNKNOWN_WATCH}},
    },
    "/watches/{watch_id}/links": {
        "parameters": [_WATCH_ID],
        "get": {"summary": "The links known for a watch, newest first", "operationId": "listLinks",
                "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}}],
                "responses": {**_list_of("Link", "its links"), **_ERRORS, **_UNKNOWN_WATCH}},
    },
    "/alerts": {
        "get": {"summary": "New links found, oldest first", "operationId": "listAlerts",
                "parameters": [
                    {"name": "watch", "in": "query", "schema": {"type": "string"},
                     "description": "a watch id or URL (400 when there is no such watch)"},
                    {"name": "since", "in": "query", "schema": {"type": "string"},
                     "description": "a duration back from now (30s, 5m, 2h, 1d) or a Unix time in seconds"}],
                "responses": {**_list_of("Alert", "the alerts"), **_ERRORS}},
    },
    "/proxies": {"get": {"summary": "The proxy pool (passwords masked)", "operationId": "listProxies",
                         "responses": {**_list_of("Proxy", "the proxies"), **_ERRORS}}},
    "/workers": {"get": {"summary": "Workers by their last heartbeat", "operationId": "listWorkers",
                         "responses": {**_list_of("Worker", "the workers"), **_ERRORS}}},
    "/hosts": {"get": {"summary": "The host disable list", "operationId": "listDisabledHosts",
                       "responses": {**_list_of("DisabledHost", "the disabled hosts"), **_ERRORS}}},
    "/sinks": {"get": {"summary": "Where alerts go (secrets masked)", "operationId": "listSinks",
                       "responses": {**_list_of("Sink", "the sinks"), **_ERRORS}}},
    "/dead-letters": {"get": {"summary": "Messages the pipeline refused (left in the queue)",
                              "operationId": "listDeadLetters",
                              "responses": {**_list_of("DeadLetter", "the dead letters"), **_ERRORS, **_BROKER_DOWN}}},
    "/dead-letters/replay": {
        "post": {"summary": "Publish dead letters back to the queue they died in", "operationId": "replayDeadLetters",
                 "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("Replay")}}},
                 "responses": {"200": _json({"type": "object", "properties": {
                     "replayed": {"type": "array", "items": {"type": "string"}},
                     "missing": {"type": "array", "items": {"type": "string"},
                                 "description": "ids not in the queue (or not replayable)"}}}, "what was replayed"),
                     **_ERRORS, **_BROKER_DOWN}},
    },
    "/openapi.json": {"get": {"summary": "This description", "operationId": "openapi",
                              "responses": {"200": _json({"type": "object"}, "OpenAPI 3")}}},
}


def document() -> dict:
    """The OpenAPI 3.0 document of ``/api/v1``."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "homepage-monitor", "version": "1",
                 "description": "The watch list, what it found and the fleet, over the same store as the `monitor` CLI. "
                                "Bad input is answered 400 with a one-line {\"error\": ...} and changes nothing."},
        "servers": [{"url": PREFIX}],
        "security": [{"bearer": []}, {"basic": []}],
        "paths": _PATHS,
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "required off loopback: MONITOR_WEB_TOKEN"},
                                "basic": {"type": "http", "scheme": "basic",
                                          "description": "any user name, the token as password"}},
            "responses": {
                "BadInput": _json(_ref("Error"), "bad input: nothing changed"),
                "Unauthorized": _json(_ref("Error"), "the token is missing or wrong"),
                "NotFound": _json(_ref("Error"), "no such watch"),
                "Unavailable": _json(_ref("Error"), "the broker cannot be reached"),
            },
        },
    }

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
_UNKNOWN = {"404": {"$ref": "#/components/responses/NotFound"}}  # the watch, filter, sink... of the path
_BROKER_DOWN = {"503": {"$ref": "#/components/responses/Unavailable"}}
_FAILED_OUT_THERE = {"502": {"$ref": "#/components/responses/TestFailed"}}


def _path_id(name: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}


def _path_name(name: str, description: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, "description": description}


def _body(name: str) -> dict:
    return {"required": True, "content": {"application/json": {"schema": _ref(name)}}}


def _object(description: str, **properties: dict) -> dict:
    return _json({"type": "object", "properties": properties}, description)


_WATCH_ID = _path_id("watch_id")
_PAGE = [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1},
          "description": "at most this many"},
         {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0},
          "description": "skip this many first"}]
_INTEGER, _STRING, _STRINGS = {"type": "integer"}, {"type": "string"}, {"type": "array", "items": {"type": "string"}}
_SCOPE = {"watch": {"oneOf": [{"type": "integer"}, {"type": "string"}], "description": "a watch id or URL: for it only"},
          "tag": {"type": "string", "description": "for the watches with this tag (not with watch)"}}
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
    "Retry": {"type": "object", "additionalProperties": False, "properties": {
        "ids": {"type": "array", "items": {"type": "string"}, "description": "alert ids"}, "all": {"type": "boolean"},
        "sink": {"type": "string", "description": "only this sink's (400 when there is no such sink)"}},
        "description": "give ids or all: true"},
    "Filter": {"type": "object", "properties": {
        "id": {"type": "integer"}, "rule": {"type": "string"}, "pattern": {"type": "string"},
        "watch_id": {"type": "integer", "nullable": True}, "tag": {"type": "string", "nullable": True},
        "declared": {"type": "boolean", "description": "from the TOML file: removed there, not here"}}},
    "NewFilter": {"type": "object", "required": ["rule"], "additionalProperties": False, "properties": {
        "rule": {"type": "string", "enum": ["include", "exclude", "url-allow", "url-deny", "same-site", "noise"]},
        "pattern": {"type": "string", "description": "words, or /a regular expression/ (include, exclude, url-*)"},
        **_SCOPE}, "description": "as `monitor filter add`; without watch or tag, for every watch"},
    "NewSink": {"type": "object", "required": ["kind", "target"], "additionalProperties": False, "properties": {
        "kind": {"type": "string", "example": "webhook", "description": "webhook, email or apprise (`monitor sink kinds`)"},
        "target": {"type": "string", "example": "https://hooks.example/T0KEN"},
        "name": {"type": "string", "description": "default KIND-N"},
        "secret": {"type": "string", "description": "webhook: sign each body (X-Monitor-Signature)"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "webhook: headers to add"},
        "digest": {"oneOf": [{"type": "string", "example": "15m"}, {"type": "integer", "description": "seconds"}],
                   "description": "email: one mail per period"},
        **_SCOPE}, "description": "as `monitor sink add`; without watch or tag, for every watch"},
    "NewProxy": {"type": "object", "required": ["url"], "additionalProperties": False, "properties": {
        "url": {"type": "string", "example": "http://user:pass@10.0.0.5:3128"},
        "test": {"type": "boolean", "default": True, "description": "fetch page through it first; refused when it fails"},
        "page": {"type": "string", "default": "https://example.org/"}}},
    "ProxyTest": {"type": "object", "additionalProperties": False, "properties": {
        "page": {"type": "string", "default": "https://example.org/"}}},
    "FailedDelivery": {"type": "object", "properties": {
        "sink": {"type": "string"}, "alert_id": {"type": "string"}, "url": {"type": "string"}, "text": {"type": "string"},
        "attempts": {"type": "integer"}, "last_error": {"type": "string", "nullable": True},
        "failed_at": {"type": "number"}}},
}

_PATHS = {
    "/watches": {
        "get": {"summary": "The watch list with its last results, by id", "operationId": "listWatches",
                "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"},
                                "description": "only those with this in their URL (password aside), name or tag"},
                               *_PAGE],
                "responses": {**_list_of("Watch", "the watches"), **_ERRORS}},
        "post": {"summary": "Watch a homepage (as `monitor watch add`)", "operationId": "addWatch",
                 "requestBody": _body("NewWatch"),
                 "responses": {"201": _json(_ref("Watch"), "the watch added"), **_ERRORS}},
    },
    "/watches/{watch_id}": {
        "parameters": [_WATCH_ID],
        "get": {"summary": "One watch", "operationId": "getWatch",
                "responses": {"200": _json(_ref("Watch"), "the watch"), **_ERRORS, **_UNKNOWN}},
        "patch": {"summary": "Change a watch (as `monitor watch set|enable|disable`)", "operationId": "changeWatch",
                  "requestBody": _body("WatchChanges"),
                  "responses": {"200": _json(_ref("Watch"), "the watch changed"), **_ERRORS, **_UNKNOWN}},
        "delete": {"summary": "Stop watching; its links and alerts go too", "operationId": "removeWatch",
                   "responses": {"200": _json({"type": "object", "properties": {"removed": {"type": "integer"}}},
                                              "the watch removed"), **_ERRORS, **_UNKNOWN}},
    },
    "/watches/{watch_id}/recheck": {
        "parameters": [_WATCH_ID],
        "post": {"summary": "Check now: the watch is due at once, the scheduler queues it within a second",
                 "operationId": "recheckWatch",
                 "responses": {"202": _json({"type": "object", "properties": {
                     "id": {"type": "integer"},
                     "in_flight": {"type": "boolean", "description": "a check was already under way"}}},
                     "the watch is due"), **_ERRORS, **_UNKNOWN}},
    },
    "/watches/{watch_id}/links": {
        "parameters": [_WATCH_ID],
        "get": {"summary": "The links known for a watch, newest first", "operationId": "listLinks",
                "parameters": _PAGE, "responses": {**_list_of("Link", "its links"), **_ERRORS, **_UNKNOWN}},
    },
    "/watches/export": {
        "get": {"summary": "The watch list as CSV (as `monitor watch export`; passwords masked)",
                "operationId": "exportWatches",
                "responses": {"200": {"description": "url,interval,name,tag,enabled",
                                      "content": {"text/csv": {"schema": {"type": "string"}}}}, **_ERRORS}},
    },
    "/watches/import": {
        "post": {"summary": "Add watches from the file that is the body (as `monitor watch import`)",
                 "operationId": "importWatches",
                 "parameters": [{"name": "format", "in": "query", "schema": {
                     "type": "string", "enum": ["auto", "list", "csv", "urlwatch", "opml", "changedetection"],
                     "default": "auto"}}],
                 "requestBody": {"required": True, "content": {"application/octet-stream": {
                     "schema": {"type": "string", "format": "binary"}}}},
                 "responses": {"200": _object(
                     "what was imported; an entry refused does not stop the others",
                     added=_INTEGER, skipped={**_INTEGER, "description": "already watched"},
                     refused={**_INTEGER, "description": "invalid entries"},
                     messages={**_STRINGS, "description": "a line per entry refused or with settings not mapped"}),
                     **_ERRORS}},
    },
    "/filters": {
        "get": {"summary": "The rules that hold back alerts", "operationId": "listFilters",
                "responses": {**_list_of("Filter", "the rules"), **_ERRORS}},
        "post": {"summary": "Add a rule (as `monitor filter add`)", "operationId": "addFilter",
                 "requestBody": _body("NewFilter"),
                 "responses": {"201": _json(_ref("Filter"), "the rule added"), **_ERRORS}},
    },
    "/filters/{filter_id}": {
        "parameters": [_path_id("filter_id")],
        "delete": {"summary": "Remove a rule (one the TOML file declares: 400)", "operationId": "removeFilter",
                   "responses": {"200": _object("the rule removed", removed=_INTEGER), **_ERRORS, **_UNKNOWN}},
    },
    "/alerts": {
        "get": {"summary": "New links found, oldest first", "operationId": "listAlerts",
                "parameters": [
                    {"name": "watch", "in": "query", "schema": {"type": "string"},
                     "description": "a watch id or URL (400 when there is no such watch)"},
                    {"name": "since", "in": "query", "schema": {"type": "string"},
                     "description": "a duration back from now (30s, 5m, 2h, 1d) or a Unix time in seconds"}, *_PAGE],
                "responses": {**_list_of("Alert", "the alerts"), **_ERRORS}},
    },
    "/alerts/failed": {
        "get": {"summary": "Deliveries the sinks gave up on, oldest first", "operationId": "listFailedDeliveries",
                "parameters": [{"name": "sink", "in": "query", "schema": {"type": "string"}}, *_PAGE],
                "responses": {**_list_of("FailedDelivery", "the failed deliveries"), **_ERRORS}},
    },
    "/alerts/retry": {
        "post": {"summary": "Make failed deliveries pending again (as `monitor alerts retry`)",
                 "operationId": "retryFailedDeliveries", "requestBody": _body("Retry"),
                 "responses": {"200": _object("the notifier sends them within a second", pending_again=_INTEGER),
                               **_ERRORS}},
    },
    "/proxies": {
        "get": {"summary": "The proxy pool (passwords masked)", "operationId": "listProxies",
                "responses": {**_list_of("Proxy", "the proxies"), **_ERRORS}},
        "post": {"summary": "Add a proxy, tested first (as `monitor proxy add`)", "operationId": "addProxy",
                 "requestBody": _body("NewProxy"),
                 "responses": {"201": _json(_ref("Proxy"), "the proxy added (with a warning when it answered but "
                                                           "the page failed)"), **_ERRORS}},
    },
    "/proxies/{proxy_id}": {
        "parameters": [_path_id("proxy_id")],
        "delete": {"summary": "Remove a proxy from the pool", "operationId": "removeProxy",
                   "responses": {"200": _object("the proxy removed", removed=_INTEGER), **_ERRORS, **_UNKNOWN}},
    },
    "/proxies/{proxy_id}/test": {
        "parameters": [_path_id("proxy_id")],
        "post": {"summary": "Fetch a page through a proxy (as `monitor proxy test`)", "operationId": "testProxy",
                 "requestBody": {"required": False, "content": {"application/json": {"schema": _ref("ProxyTest")}}},
                 "responses": {"200": _object("it went well", id=_INTEGER, outcome=_STRING),
                               **_ERRORS, **_UNKNOWN, **_FAILED_OUT_THERE}},
    },
    "/workers": {"get": {"summary": "Workers by their last heartbeat", "operationId": "listWorkers",
                         "responses": {**_list_of("Worker", "the workers"), **_ERRORS}}},
    "/hosts": {"get": {"summary": "The host disable list", "operationId": "listDisabledHosts",
                       "responses": {**_list_of("DisabledHost", "the disabled hosts"), **_ERRORS}}},
    "/hosts/{host}/enable": {
        "parameters": [_path_name("host", "as the disable list writes it")],
        "post": {"summary": "Lift a host's cooldown now, in every worker (as `monitor hosts enable`)",
                 "operationId": "enableHost",
                 "description": "503 when it is off the disable list but the running workers could not be told "
                                "(the broker is down): they skip it until its cooldown ends",
                 "responses": {"200": _object("the host enabled", enabled=_STRING), **_ERRORS, **_UNKNOWN,
                               **_BROKER_DOWN}},
    },
    "/sinks": {
        "get": {"summary": "Where alerts go (secrets masked)", "operationId": "listSinks",
                "responses": {**_list_of("Sink", "the sinks"), **_ERRORS}},
        "post": {"summary": "Deliver alerts to a channel (as `monitor sink add`)", "operationId": "addSink",
                 "requestBody": _body("NewSink"), "responses": {"201": _json(_ref("Sink"), "the sink added"), **_ERRORS}},
    },
    "/sinks/{name}": {
        "parameters": [_path_name("name", "the sink's name")],
        "delete": {"summary": "Stop delivering to a sink (one the TOML file declares: 400)", "operationId": "removeSink",
                   "responses": {"200": _object("the sink removed", removed=_STRING), **_ERRORS, **_UNKNOWN}},
    },
    "/sinks/{name}/test": {
        "parameters": [_path_name("name", "the sink's name")],
        "post": {"summary": "Send one test alert now (as `monitor sink test`)", "operationId": "testSink",
                 "responses": {"200": _object("delivered", sink=_STRING, delivered={"type": "boolean"}),
                               **_ERRORS, **_UNKNOWN, **_FAILED_OUT_THERE}},
    },
    "/dead-letters": {"get": {"summary": "Messages the pipeline refused (left in the queue)",
                              "operationId": "listDeadLetters",
                              "responses": {**_list_of("DeadLetter", "the dead letters"), **_ERRORS, **_BROKER_DOWN}}},
    "/dead-letters/replay": {
        "post": {"summary": "Publish dead letters back to the queue they died in", "operationId": "replayDeadLetters",
                 "requestBody": _body("Replay"),
                 "responses": {"200": _json({"type": "object", "properties": {
                     "replayed": {"type": "array", "items": {"type": "string"}},
                     "missing": {"type": "array", "items": {"type": "string"},
                                 "description": "ids not in the queue (or not replayable)"}}}, "what was replayed"),
                     **_ERRORS, **_BROKER_DOWN}},
    },
    "/dead-letters/purge": {
        "post": {"summary": "Delete every dead letter (as `monitor dlq purge`)", "operationId": "purgeDeadLetters",
                 "responses": {"200": _object("how many were deleted", purged=_INTEGER), **_ERRORS, **_BROKER_DOWN}},
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
                                "Bad input is answered 400 with a one-line {\"error\": ...} and changes nothing. "
                                "Long lists take limit and offset."},
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
                "NotFound": _json(_ref("Error"), "no such watch (or filter, sink, proxy, disabled host)"),
                "Unavailable": _json(_ref("Error"), "the broker cannot be reached"),
                "TestFailed": _json(_ref("Error"), "what the test was sent through or to failed: the reason"),
            },
        },
    }

"""Job and task message schemas (``monitor.messages``): round trips and validation."""
from __future__ import annotations

import json

import pytest

from monitor import messages
from monitor.messages import Alert, InvalidMessage, Job, Task

VALID_TASK = {"baseUrl": "https://news.example/", "id": 7, "context": [{"url": "https://news.example/a", "text": "A"}]}


def task_body(**changes: object) -> bytes:
    """A valid task message with some fields replaced (a value of ``...`` removes the field)."""
    data = {**VALID_TASK, **changes}
    return json.dumps({key: value for key, value in data.items() if value is not ...}).encode()


def rejected(body: bytes, cls: type = Task) -> str:
    """The InvalidMessage reason for ``body``; fails the test if it is accepted."""
    with pytest.raises(InvalidMessage) as info:
        cls.from_bytes(body)
    return str(info.value)


# --- round trips ---------------------------------------------------------------------------
@pytest.mark.parametrize("job", [Job("https://news.example/", 3, 1700000000.5), Job("https://news.example/", 4),
                                 Job("https://news.example/", 5, 1.0, '"etag"', "Sun, 22 Nov 2026 08:00:00 GMT", "ab" * 16)])
def test_job_round_trip(job: Job) -> None:
    assert Job.from_bytes(job.to_bytes()) == job


def test_task_round_trip_with_every_field() -> None:
    task = Task("https://news.example/", 3, [{"url": "https://news.example/ü", "text": "Über ✓"}], "error", "timeout",
                "https://news.example/home", 1700000000.25, 1234, 504, "worker-1")
    assert Task.from_bytes(task.to_bytes()) == task


def test_task_defaults() -> None:
    task = Task.from_bytes(task_body())
    assert (task.status, task.error, task.http_status, task.worker) == ("ok", None, None, None)


def test_task_wire_names() -> None:
    data = json.loads(Task("https://news.example/", 3, []).to_bytes())
    assert data["baseUrl"] == "https://news.example/" and data["id"] == 3 and data["context"] == []


def test_missing_link_text_becomes_empty() -> None:
    task = Task.from_bytes(task_body(context=[{"url": "https://news.example/a"}]))
    assert task.context == [{"url": "https://news.example/a", "text": ""}]


def test_unknown_fields_are_ignored() -> None:
    task = Task.from_bytes(task_body(priority=5, extra={"a": 1}))
    assert task == Task("https://news.example/", 7, [{"url": "https://news.example/a", "text": "A"}])
    job = Job.from_bytes(b'{"baseUrl": "https://news.example/", "id": 7, "attempt": 2, "whatever": null}')
    assert job == Job("https://news.example/", 7)


def test_unknown_fields_inside_links_are_dropped() -> None:
    task = Task.from_bytes(task_body(context=[{"url": "https://news.example/a", "text": "A", "rank": 1}]))
    assert task.context == [{"url": "https://news.example/a", "text": "A"}]


def test_alert_carries_the_documented_fields() -> None:
    alert = Alert("7-Yu35yr", 7, "https://news.example/", "https://news.example/a", "A", 1700000000.0)
    assert json.loads(alert.to_bytes()) == {"alert_id": "7-Yu35yr", "watch_id": 7, "baseUrl": "https://news.example/",
                                            "url": "https://news.example/a", "text": "A", "first_seen": 1700000000.0}


# --- invalid messages -------------------------------------------------------------------------
@pytest.mark.parametrize("body", [b"not json", b"{", b"", b"\xff\xfe\x00"])
def test_non_json_is_invalid(body: bytes) -> None:
    assert rejected(body).startswith("not JSON")


@pytest.mark.parametrize("body, kind", [(b"[1, 2]", "list"), (b'"text"', "str"), (b"42", "int"), (b"null", "NoneType")])
def test_non_object_is_invalid(body: bytes, kind: str) -> None:
    assert rejected(body) == f"expected a JSON object, got {kind}"
    assert rejected(body, Job) == f"expected a JSON object, got {kind}"


@pytest.mark.parametrize("field", ["baseUrl", "id", "context"])
def test_missing_task_field(field: str) -> None:
    assert rejected(task_body(**{field: ...})) == f"missing field {field!r}"


def test_null_required_field_counts_as_missing() -> None:
    assert rejected(task_body(id=None)) == "missing field 'id'"


@pytest.mark.parametrize("field", ["baseUrl", "id"])
def test_missing_job_field(field: str) -> None:
    data = {key: value for key, value in {"baseUrl": "https://news.example/", "id": 1}.items() if key != field}
    assert rejected(json.dumps(data).encode(), Job) == f"missing field {field!r}"


@pytest.mark.parametrize("changes, reason", [
    ({"id": "7"}, "field 'id' has the wrong type (str)"),
    ({"id": True}, "field 'id' has the wrong type (bool)"),
    ({"id": 7.0}, "field 'id' has the wrong type (float)"),
    ({"baseUrl": 5}, "field 'baseUrl' has the wrong type (int)"),
    ({"context": {"url": "x"}}, "field 'context' has the wrong type (dict)"),
    ({"context": "https://news.example/a"}, "field 'context' has the wrong type (str)"),
    ({"http_status": "200"}, "field 'http_status' has the wrong type (str)"),
    ({"elapsed_ms": True}, "field 'elapsed_ms' has the wrong type (bool)"),
    ({"fetched_at": "now"}, "field 'fetched_at' has the wrong type (str)"),
    ({"status": 1}, "field 'status' has the wrong type (int)"),
])
def test_wrong_types(changes: dict, reason: str) -> None:
    assert rejected(task_body(**changes)) == reason


def test_job_wrong_types() -> None:
    assert rejected(b'{"baseUrl": "u", "id": true}', Job) == "field 'id' has the wrong type (bool)"
    assert rejected(b'{"baseUrl": "u", "id": 1, "enqueued_at": "x"}', Job) == "field 'enqueued_at' has the wrong type (str)"


@pytest.mark.parametrize("item", [{"text": "no url"}, {"url": 5, "text": "x"}, {"url": "u", "text": None},
                                  {"url": "u", "text": 3}, "https://news.example/a", None])
def test_bad_context_item(item: object) -> None:
    assert rejected(task_body(context=[{"url": "https://news.example/ok", "text": "ok"}, item])) == \
        "context[1] must be an object with string 'url' and 'text'"


def test_unknown_status() -> None:
    assert rejected(task_body(status="pending")) == "unknown status 'pending'"
    assert rejected(task_body(status="")) == "unknown status ''"


def test_not_modified_names_what_said_so_and_carries_the_validators() -> None:
    task = Task("https://news.example/", 3, [], "not_modified", etag='"v2"', content_hash="c" * 32, not_modified_by="http")
    assert Task.from_bytes(task.to_bytes()) == task
    reason = "status 'not_modified' needs 'not_modified_by' ('http' or 'hash'), and only it"
    assert rejected(task_body(status="not_modified", context=[])) == reason
    assert rejected(task_body(status="not_modified", not_modified_by="guess")) == reason
    assert rejected(task_body(status="ok", not_modified_by="hash")) == reason


def test_error_status_is_accepted() -> None:
    assert Task.from_bytes(task_body(status="error", error="timeout")).status == "error"


def test_oversize_body_is_refused_before_parsing() -> None:
    body = task_body() + b" " * messages.MAX_MESSAGE_BYTES   # still valid JSON, only too big
    reason = rejected(body)
    assert reason == f"message of {len(body)} bytes exceeds the {messages.MAX_MESSAGE_BYTES} byte limit"


def test_body_at_the_limit_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    body = task_body()
    monkeypatch.setattr(messages, "MAX_MESSAGE_BYTES", len(body))
    assert Task.from_bytes(body).id == 7
    assert "exceeds" in rejected(body + b" ")


# --- strict schemas: nothing a store or a formatter would choke on -----------------------------
@pytest.mark.parametrize("body, reason", [
    (task_body(context=[{"url": "https://news.example/a", "text": "\ud800"}]), "not valid text (a lone surrogate)"),
    (task_body(baseUrl="https://news.example/\udfff"), "not valid text"),
    (task_body(context=[{"url": "https://news.example/a", "text": "x" * 301}]), "longer than 300 characters"),
    (task_body(context=[{"url": "https://news.example/" + "a" * 2100, "text": ""}]), "longer than 2048 characters"),
    (task_body(fetched_at=float("nan")), "NaN is not a number a message may carry"),
    (task_body(id=2**70), "out of range"),
    (task_body(id=0), "out of range"),
    (task_body(http_status=-1), "out of range"),
    (b'{"baseUrl": "https://a.example/", "id": 1, "context": [], "fetched_at": 1e999}', "out of range"),
])
def test_task_fields_must_be_storable(body: bytes, reason: str) -> None:
    assert reason in rejected(body)


CONTROL_CASES = [
    (messages.HostDisabled, {"host": "a.example", "until": "NaN", "reason": "r", "worker": "w"}, "NaN"),
    (messages.HostDisabled, {"host": "a.example", "until": "Infinity", "reason": "r", "worker": "w"}, "Infinity"),
    (messages.Heartbeat, {"worker": "w", "host": "h", "pid": 2**70, "started_at": 1.0}, "out of range"),
    (messages.Heartbeat, {"worker": "w", "host": "h", "pid": 5, "started_at": 1.0, "proxies": [1]}, "list of objects"),
    (messages.Heartbeat, {"worker": "w", "host": "h", "pid": 5, "started_at": 1.0,
                          "proxies": [{"id": 1, "requests": -3}]}, "out of range"),
    (messages.LeaseRequest, {"op": "lease", "worker": "w", "count": -1}, "out of range"),
    (messages.LeaseRequest, {"op": "lease", "worker": "w", "count": 0}, "at least one proxy"),
    (messages.LeaseRequest, {"op": "lease", "worker": "w", "count": 1, "exclude": [True]}, "wrong type"),
    (messages.LeaseReply, {"proxies": [{"id": 1, "url": "http://p:1"}], "pool_size": 1,
                           "disabled_hosts": {"a.example": "NaN"}}, "NaN"),
]


@pytest.mark.parametrize("cls, data, reason", CONTROL_CASES, ids=[f"{case[0].__name__}-{n}" for n, case in enumerate(CONTROL_CASES)])
def test_control_messages_are_strict(cls: type, data: dict, reason: str) -> None:
    # NaN and Infinity are written bare, as Python's json writes them.
    body = json.dumps(data).replace('"NaN"', "NaN").replace('"Infinity"', "Infinity").encode()
    assert reason in rejected(body, cls)


def test_a_release_needs_no_count() -> None:
    request = messages.LeaseRequest.from_bytes(messages.LeaseRequest("release", "w").to_bytes())
    assert (request.op, request.count) == ("release", 0)

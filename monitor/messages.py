"""The message schemas exchanged over RabbitMQ, and their validation.

* job  (``job_queue``):  ``{"baseUrl", "id", "enqueued_at"?, "etag"?, "last_modified"?, "content_hash"?,
  "token", "selector"?}``: the validators of the last successful check, so the worker can ask for the page
  conditionally and skip parsing a body that did not change; ``token`` proves the job was
  issued by the home's scheduler (see :mod:`monitor.homekey`); ``selector``: the watch's CSS
  selector, only the links inside the regions it matches count
* task (``task_queue``): ``{"baseUrl", "id", "context": [{"url", "text"}], "status", "error",
  "final_url", "fetched_at", "elapsed_ms", "parse_ms"?, "http_status", "worker", "etag", "last_modified",
  "content_hash", "not_modified_by", "token", "selector"?}``. ``status`` is ``ok``, ``not_modified`` (no
  links sent: ``not_modified_by`` says whether the server answered 304 (``"http"``) or the
  body hashed as before (``"hash"``)), ``error`` or ``skipped``; ``error`` with status ``ok``
  is a warning (e.g. the page had more links than are watched); ``token`` and ``selector`` are
  the job's, copied (the processor drops links found under a selector the watch no longer has)
* alert (sinks):        ``{"alert_id", "watch_id", "baseUrl", "url", "text", "first_seen"}``

Unknown fields are ignored. A message that fails validation raises :class:`InvalidMessage`
with a one-line reason; consumers reject it to the dead-letter queue.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

MAX_MESSAGE_BYTES = 32 * 1024 * 1024
MAX_INT = 2**63 - 1  # SQLite's INTEGER
MAX_STRING = 2048  # any string field: URLs, errors, validators, names
MAX_LINK_TEXT = 300  # link text is cut to this many characters at extraction
MAX_LIST = 100_000
MAX_NAME = 255  # host names, worker names
MAX_LEASE = 1000  # proxies one lease request may ask for
MAX_SELECTOR = 500  # characters of a watch's CSS selector
DIRECT = 0  # the direct connection, where a proxy id is expected
# "skipped": not fetched on purpose (the host is in cooldown).
STATUSES = ("ok", "not_modified", "error", "skipped")
NOT_MODIFIED_BY = ("http", "hash")


class InvalidMessage(ValueError):
    """A message body that does not match its schema; the text says what is wrong."""


def _no_constant(name: str):
    raise InvalidMessage(f"{name} is not a number a message may carry")


def _decode(body: bytes) -> dict:
    if len(body) > MAX_MESSAGE_BYTES:
        raise InvalidMessage(f"message of {len(body)} bytes exceeds the {MAX_MESSAGE_BYTES} byte limit")
    try:
        data = json.loads(body, parse_constant=_no_constant)  # Python's json takes NaN and Infinity
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidMessage(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidMessage(f"expected a JSON object, got {type(data).__name__}")
    return data


def check_text(value: str, name: str, max_chars: int = MAX_STRING) -> str:
    """``value`` when it is at most ``max_chars`` characters of text UTF-8 can carry (JSON
    escapes can smuggle lone surrogates in, which every store downstream refuses)."""
    if len(value) > max_chars:
        raise InvalidMessage(f"field {name!r} is longer than {max_chars} characters")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidMessage(f"field {name!r} is not valid text (a lone surrogate)") from None
    return value


def _check(value, name: str, kind: type | tuple[type, ...], minimum: float, maximum: float, max_chars: int):
    # bool is an int in Python; an id of `true` is still wrong.
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise InvalidMessage(f"field {name!r} has the wrong type ({type(value).__name__})")
    if isinstance(value, str):
        return check_text(value, name, max_chars)
    if isinstance(value, (int, float)) and not minimum <= value <= maximum:  # NaN fails this too
        raise InvalidMessage(f"field {name!r} is out of range ({value!r})")
    if isinstance(value, (list, dict)) and len(value) > MAX_LIST:
        raise InvalidMessage(f"field {name!r} has more than {MAX_LIST} items")
    return value


def _require(data: dict, name: str, kind: type | tuple[type, ...], optional: bool = False,
             minimum: float = -MAX_INT, maximum: float = MAX_INT, max_chars: int = MAX_STRING):
    """Field ``name`` of ``data``: of ``kind``, numbers within [minimum, maximum] (finite),
    strings valid text of at most ``max_chars`` characters, lists and objects bounded."""
    if name not in data or data[name] is None:
        if optional:
            return None
        raise InvalidMessage(f"missing field {name!r}")
    return _check(data[name], name, kind, minimum, maximum, max_chars)


def _encode(data: dict) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Job:
    base_url: str
    id: int
    enqueued_at: float | None = None
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    token: str | None = None
    selector: str | None = None

    def to_bytes(self) -> bytes:
        return _encode({"baseUrl": self.base_url, "id": self.id, "enqueued_at": self.enqueued_at, "etag": self.etag,
                        "last_modified": self.last_modified, "content_hash": self.content_hash, "token": self.token,
                        "selector": self.selector})

    @classmethod
    def from_bytes(cls, body: bytes) -> "Job":
        data = _decode(body)
        return cls(
            base_url=_require(data, "baseUrl", str),
            id=_require(data, "id", int, minimum=1),
            enqueued_at=_require(data, "enqueued_at", (int, float), optional=True, minimum=0),
            etag=_require(data, "etag", str, optional=True),
            last_modified=_require(data, "last_modified", str, optional=True),
            content_hash=_require(data, "content_hash", str, optional=True),
            token=_require(data, "token", str, optional=True, max_chars=MAX_NAME),
            selector=_selector(data),
        )


def _selector(data: dict) -> str | None:
    """The optional ``selector`` field: absent, or a selector of at most ``MAX_SELECTOR``
    characters (its syntax is the parser's to judge: a bad one ends as the check's error)."""
    selector = _require(data, "selector", str, optional=True, max_chars=MAX_SELECTOR)
    if selector is not None and not selector.strip():
        raise InvalidMessage("field 'selector' is empty (leave it out for the whole page)")
    return selector


@dataclass(frozen=True)
class Task:
    base_url: str
    id: int
    context: list[dict[str, str]]
    status: str = "ok"
    error: str | None = None
    final_url: str | None = None
    fetched_at: float | None = None
    elapsed_ms: int | None = None
    http_status: int | None = None
    worker: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    not_modified_by: str | None = None
    token: str | None = None
    selector: str | None = None
    parse_ms: float | None = None  # the time taken to extract the links (None: the body was not parsed)

    def to_bytes(self) -> bytes:
        return _encode({
            "baseUrl": self.base_url, "id": self.id, "context": self.context, "status": self.status,
            "error": self.error, "final_url": self.final_url, "fetched_at": self.fetched_at,
            "elapsed_ms": self.elapsed_ms, "parse_ms": self.parse_ms, "http_status": self.http_status, "worker": self.worker,
            "etag": self.etag, "last_modified": self.last_modified, "content_hash": self.content_hash,
            "not_modified_by": self.not_modified_by, "token": self.token, "selector": self.selector,
        })

    @classmethod
    def from_bytes(cls, body: bytes) -> "Task":
        data = _decode(body)
        context = _require(data, "context", list)
        for i, link in enumerate(context):
            if not isinstance(link, dict) or not isinstance(link.get("url"), str) or not isinstance(link.get("text", ""), str):
                raise InvalidMessage(f"context[{i}] must be an object with string 'url' and 'text'")
            check_text(link["url"], f"context[{i}].url")
            check_text(link.get("text", ""), f"context[{i}].text", MAX_LINK_TEXT)
        status = _require(data, "status", str, optional=True)
        status = "ok" if status is None else status
        if status not in STATUSES:
            raise InvalidMessage(f"unknown status {status!r}")
        not_modified_by = _require(data, "not_modified_by", str, optional=True)
        if (status == "not_modified") != (not_modified_by in NOT_MODIFIED_BY):
            raise InvalidMessage("status 'not_modified' needs 'not_modified_by' ('http' or 'hash'), and only it")
        return cls(
            base_url=_require(data, "baseUrl", str),
            id=_require(data, "id", int, minimum=1),
            context=[{"url": link["url"], "text": link.get("text", "")} for link in context],
            status=status,
            error=_require(data, "error", str, optional=True),
            final_url=_require(data, "final_url", str, optional=True),
            fetched_at=_require(data, "fetched_at", (int, float), optional=True, minimum=0),
            elapsed_ms=_require(data, "elapsed_ms", int, optional=True, minimum=0),
            parse_ms=_require(data, "parse_ms", (int, float), optional=True, minimum=0),
            http_status=_require(data, "http_status", int, optional=True, minimum=100, maximum=999),
            worker=_require(data, "worker", str, optional=True),
            etag=_require(data, "etag", str, optional=True),
            last_modified=_require(data, "last_modified", str, optional=True),
            content_hash=_require(data, "content_hash", str, optional=True),
            not_modified_by=not_modified_by,
            token=_require(data, "token", str, optional=True, max_chars=MAX_NAME),
            selector=_selector(data),
        )


@dataclass(frozen=True)
class Alert:
    alert_id: str
    watch_id: int
    base_url: str
    url: str
    text: str
    first_seen: float

    def as_dict(self) -> dict:
        return {"alert_id": self.alert_id, "watch_id": self.watch_id, "baseUrl": self.base_url,
                "url": self.url, "text": self.text, "first_seen": self.first_seen}

    def to_bytes(self) -> bytes:
        return _encode(self.as_dict())


# --- the control plane: proxy leases, heartbeats, the host disable list ----------------------
def run_id(pid: int, started_at: float) -> str:
    """Names one run of a worker process: supervisord restarts a worker under the same name."""
    return f"{pid}:{started_at!r}"


@dataclass(frozen=True)
class LeaseRequest:
    """``control`` queue, request/reply, from one run of a worker (``run``: its pid and start
    time; a request from a new run of the same worker name returns the old run's leases).

    * ``lease``: ``count`` more exits, not among ``exclude`` (those held). With ``host``: the
      exits this job tried were ``refused`` by that host (``DIRECT`` for the direct
      connection); the controller disables the host when every exit of the pool has been.
      ``broken``: proxies that failed themselves since the last request.
    * ``release``: give back ``proxies`` (all of this worker's when empty).
    """
    op: str
    worker: str
    run: str = ""
    count: int = 0
    exclude: list[int] = field(default_factory=list)
    host: str | None = None
    refused: list[int] = field(default_factory=list)
    broken: list[int] = field(default_factory=list)
    proxies: list[int] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        return _encode(dataclasses.asdict(self))

    @classmethod
    def from_bytes(cls, body: bytes) -> "LeaseRequest":
        data = _decode(body)
        op = _require(data, "op", str)
        if op not in ("lease", "release"):
            raise InvalidMessage(f"unknown op {op!r}")
        count = _require(data, "count", int, optional=True, minimum=0, maximum=MAX_LEASE) or 0
        if op == "lease" and count < 1:
            raise InvalidMessage("a lease asks for at least one proxy")

        def ids(name: str, minimum: int = 1) -> list[int]:
            return [_check(item, f"{name}[]", int, minimum, MAX_INT, 0)
                    for item in _require(data, name, list, optional=True) or []]
        return cls(op, _require(data, "worker", str, max_chars=MAX_NAME), _require(data, "run", str, optional=True,
                                                                                   max_chars=MAX_NAME) or "",
                   count, ids("exclude"), _require(data, "host", str, optional=True, max_chars=MAX_NAME),
                   ids("refused", minimum=DIRECT), ids("broken"), ids("proxies"))


@dataclass(frozen=True)
class LeaseReply:
    """The proxies granted (``[{"id", "url"}]``), the pool's size (0: fetch directly) and the
    hosts currently disabled (``{host: until}``)."""
    proxies: list[dict]
    pool_size: int
    disabled_hosts: dict[str, float]

    def to_bytes(self) -> bytes:
        return _encode({"proxies": self.proxies, "pool_size": self.pool_size, "disabled_hosts": self.disabled_hosts})

    @classmethod
    def from_bytes(cls, body: bytes) -> "LeaseReply":
        data = _decode(body)
        proxies = []
        for proxy in _require(data, "proxies", list):
            if not isinstance(proxy, dict):
                raise InvalidMessage("field 'proxies' must be a list of objects")
            proxies.append({"id": _require(proxy, "id", int, minimum=1), "url": _require(proxy, "url", str)})
        disabled = _require(data, "disabled_hosts", dict, optional=True) or {}
        return cls(proxies, _require(data, "pool_size", int, minimum=0),
                   {check_text(host, "disabled_hosts", MAX_NAME): _check(until, "disabled_hosts[]", (int, float), 0, MAX_INT, 0)
                    for host, until in disabled.items()})


@dataclass(frozen=True)
class Heartbeat:
    """``heartbeats`` queue, every few seconds from each worker. ``proxies`` carries per-proxy
    counters since the previous heartbeat: ``[{"id", "requests", "refusals", "last_error"}]``."""
    worker: str
    host: str
    pid: int
    started_at: float
    state: str = "alive"
    jobs_done: int = 0
    errors: int = 0
    current_job: str | None = None
    proxies: list[dict] = field(default_factory=list)

    @property
    def run(self) -> str:
        return run_id(self.pid, self.started_at)

    def to_bytes(self) -> bytes:
        return _encode(dataclasses.asdict(self))

    @classmethod
    def from_bytes(cls, body: bytes) -> "Heartbeat":
        data = _decode(body)
        state = _require(data, "state", str, optional=True) or "alive"
        if state not in ("alive", "stopped"):
            raise InvalidMessage(f"unknown state {state!r}")
        proxies = []
        for proxy in _require(data, "proxies", list, optional=True) or []:
            if not isinstance(proxy, dict):
                raise InvalidMessage("field 'proxies' must be a list of objects")
            proxies.append({"id": _require(proxy, "id", int, minimum=1),
                            "requests": _require(proxy, "requests", int, optional=True, minimum=0) or 0,
                            "refusals": _require(proxy, "refusals", int, optional=True, minimum=0) or 0,
                            "last_error": _require(proxy, "last_error", str, optional=True)})
        return cls(_require(data, "worker", str, max_chars=MAX_NAME), _require(data, "host", str, max_chars=MAX_NAME),
                   _require(data, "pid", int, minimum=1, maximum=2**31 - 1),
                   _require(data, "started_at", (int, float), minimum=0), state,
                   _require(data, "jobs_done", int, optional=True, minimum=0) or 0,
                   _require(data, "errors", int, optional=True, minimum=0) or 0,
                   _require(data, "current_job", str, optional=True), proxies)


@dataclass(frozen=True)
class HostDisabled:
    """``host_events`` fanout: from the controller, every exit of the pool was refused by
    ``host`` (the last refusal reported by ``worker``), skip it until ``until``; from
    ``monitor hosts enable`` (``worker`` ``"cli"``), an ``until`` already past: the host's
    cooldown is lifted, fetch it again."""
    host: str
    until: float
    reason: str
    worker: str

    def to_bytes(self) -> bytes:
        return _encode(dataclasses.asdict(self))

    @classmethod
    def from_bytes(cls, body: bytes) -> "HostDisabled":
        data = _decode(body)
        return cls(_require(data, "host", str, max_chars=MAX_NAME), _require(data, "until", (int, float), minimum=0),
                   _require(data, "reason", str), _require(data, "worker", str, max_chars=MAX_NAME))

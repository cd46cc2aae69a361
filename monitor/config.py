"""Configuration: embedded defaults, overridden by a TOML file, overridden by the environment.

Nothing needs a file. The names below are part of the interface:

* ``MONITOR_HOME``     directory holding every store, log, socket and the local broker's data (``./var``)
* ``MONITOR_CONFIG``   path of the TOML file (``monitor.toml`` in the working directory)
* ``AMQP_URL``         an external broker; unset means the local node under ``MONITOR_HOME``
* ``MONITOR_WORKERS``  number of worker processes under supervisord
* ``MONITOR_ALLOW_PRIVATE=1``  allow watch targets on loopback and private addresses
* ``MONITOR_AMQP_PORT`` port of the local node (derived from ``MONITOR_HOME`` when unset)
* ``MONITOR_LOG_LEVEL`` ``debug``, ``info``, ``warning`` or ``error``

Every value, from the file or the environment, is checked here and nowhere else: a bad one
is a :class:`ConfigError` with a one-line reason (the CLI exits 2 and starts nothing).

Every key of the TOML file is a field of :class:`Config` (``workers = 4``, ``fetch_max_bytes = 5000000``);
``[sinks.NAME]`` tables and ``[[filters]]`` declare sinks and filters (:mod:`monitor.sinks.declared`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monitor.sinks.declared import DeclaredFilter, DeclaredSink


class ConfigError(ValueError):
    """The configuration file or an environment variable holds an unusable value."""


# HTML parse engines: both implement the WHATWG tree construction and give the same links;
# lexbor (C, through selectolax) is ~30x faster, html5lib is the pure-Python reference.
PARSERS = ("lexbor", "html5lib")
LOG_LEVELS = ("debug", "info", "warning", "error")
# Inclusive bounds of numeric settings; any other number must be finite and at least 0.
BOUNDS: dict[str, tuple[float, float]] = {
    "amqp_port": (1, 65535),
    "workers": (1, 256),
    "worker_concurrency": (1, 10_000),
    "processor_prefetch": (1, 65_535),
    "processor_batch": (1, 100_000),
    "dead_letter_max": (1, 10**9),
    "delivery_limit": (1, 1000),
    "default_interval": (1, 366 * 86400),
    "job_timeout": (1, 86400),
    "fetch_connect_timeout": (0.1, 3600),
    "fetch_read_timeout": (0.1, 3600),
    "fetch_deadline": (0.1, 3600),
    "fetch_max_bytes": (1, 2**31),
    "max_links_per_page": (1, 1_000_000),
    "proxies_per_worker": (1, 1000),
    "host_cooldown": (1, 366 * 86400),
    "host_cooldown_first": (1, 366 * 86400),
    "heartbeat_interval": (0.1, 3600),
    "worker_lost_after": (1, 86400),
    "sink_retry_first": (0.01, 86400),
    "sink_retry_max": (0.01, 7 * 86400),
    "sink_max_attempts": (1, 1000),
    "layout_change_fraction": (0.01, 1.0),
    "layout_change_min_links": (1, 1_000_000),
    "renotify_after": (0, 100 * 366 * 86400),
    "baseline_min_links": (1, 1_000_000),
    "broken_after": (1, 366 * 86400),
}


@dataclass(frozen=True)
class Config:
    home: Path = Path("var")
    amqp_url: str | None = None
    amqp_port: int | None = None
    workers: int = 2
    allow_private: bool = False
    default_interval: int = 300
    # A job whose result has not arrived after this long is published again, once no job
    # waits in job_queue (while jobs wait, it may still be waiting its turn).
    job_timeout: int = 600
    fetch_connect_timeout: float = 10.0
    fetch_read_timeout: float = 20.0
    fetch_deadline: float = 45.0
    fetch_max_bytes: int = 10_000_000
    fetch_max_redirects: int = 5
    max_links_per_page: int = 20_000
    parse_deadline: float = 20.0
    user_agent: str = "homepage-monitor/0.1 (+https://github.com/homepage-monitor; change monitoring bot)"
    parser: str = "lexbor"
    # Jobs each worker process has in flight at once (fetching, parsing or awaiting the
    # broker's confirm); jobs for one host are still fetched one at a time.
    worker_concurrency: int = 100
    processor_prefetch: int = 1000
    processor_batch: int = 200  # tasks committed together (one LevelDB batch, one SQLite transaction)
    delivery_limit: int = 5
    dead_letter_max: int = 100_000  # dead letters kept; past it the oldest are dropped (and logged)
    # The worker fleet (VPN patent): leases, cooldown, heartbeats, politeness.
    proxies_per_worker: int = 2
    # A host that refused every exit is skipped for host_cooldown_first seconds, twice as
    # long each time in a row, at most host_cooldown (see Store.disable_host).
    host_cooldown_first: int = 300
    host_cooldown: int = 7200
    heartbeat_interval: float = 5.0
    worker_lost_after: float = 90.0  # longer than a fetch can take: a busy worker still beats, but be safe
    politeness_delay: float = 1.0
    log_level: str = "info"
    # Alert delivery by the notifier: a failed send is tried again after sink_retry_first
    # seconds, doubling, at most sink_retry_max; after sink_max_attempts it is given up.
    sink_retry_first: float = 30.0
    sink_retry_max: float = 3600.0
    sink_max_attempts: int = 10
    # At least layout_change_min_links new links, and more than layout_change_fraction of
    # the page's: the page was redesigned; one "layout changed" alert instead of one each.
    layout_change_fraction: float = 0.5
    layout_change_min_links: int = 20
    # A first check with fewer links is not the baseline (a consent wall, a challenge page)
    # until three checks in a row find as few.
    baseline_min_links: int = 5
    # A link that left its page and comes back after this many seconds is alerted again
    # (0: never); sooner, it is the same link (a rotating "most read" box, a teaser moved).
    renotify_after: int = 30 * 86400
    # A watch failing (or skipped, its host disabled) this many seconds sends one alert, and
    # one when it recovers.
    broken_after: int = 6 * 3600
    # Declared in the TOML file ([sinks.NAME], [[filters]]), checked by monitor.sinks.declared.
    sinks: tuple[DeclaredSink, ...] = ()
    filters: tuple[DeclaredFilter, ...] = ()

    # The web front (monitor/web): HOST:PORT ('': 127.0.0.1 and a port derived from the
    # home), and the token every request must carry (required off loopback).
    web_bind: str = ""
    web_token: str = ""

    # --- paths derived from home -------------------------------------------------
    @property
    def db_path(self) -> Path:
        return self.home / "monitor.sqlite3"

    @property
    def leveldb_path(self) -> Path:
        return self.home / "links.leveldb"

    @property
    def alerts_path(self) -> Path:
        return self.home / "alerts.jsonl"

    @property
    def feeds_dir(self) -> Path:
        return self.home / "feeds"

    @property
    def log_dir(self) -> Path:
        return self.home / "log"

    @property
    def rabbitmq_dir(self) -> Path:
        return self.home / "rabbitmq"

    @property
    def supervisor_socket(self) -> Path:
        return self.home / "supervisor.sock"

    # --- the broker ------------------------------------------------------------------
    @property
    def local_broker(self) -> bool:
        """True when this stack runs its own RabbitMQ node (no ``AMQP_URL`` given)."""
        return not self.amqp_url

    @property
    def local_amqp_port(self) -> int:
        """The local node's AMQP port: configured, or derived from the home path so that
        two stacks with different homes never clash."""
        if self.amqp_port:
            return self.amqp_port
        digest = hashlib.sha256(str(self.home.resolve()).encode()).digest()
        return 10000 + int.from_bytes(digest[:4], "big") % 5000

    @property
    def web_address(self) -> tuple[str, int]:
        """Where the web front listens: ``web_bind``, or 127.0.0.1 and a port derived from
        the home path (as the broker's is, in another range)."""
        if self.web_bind:
            host, _, port = self.web_bind.rpartition(":")
            return host.strip("[]") or "127.0.0.1", int(port)
        digest = hashlib.sha256(b"web:" + str(self.home.resolve()).encode()).digest()
        return "127.0.0.1", 15000 + int.from_bytes(digest[:4], "big") % 5000

    @property
    def web_url(self) -> str:
        host, port = self.web_address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"

    @property
    def broker_url(self) -> str:
        """The AMQP URL every process connects to."""
        if self.amqp_url:
            return self.amqp_url
        try:  # the local node's own user (see monitor.broker.prepare)
            credentials = self.broker_credentials_path.read_text().strip()
        except FileNotFoundError:
            credentials = "guest:guest"  # a node created before it had one
        return f"amqp://{credentials}@127.0.0.1:{self.local_amqp_port}/%2F"

    @property
    def broker_credentials_path(self) -> Path:
        return self.rabbitmq_dir / "credentials"


_ENV = {
    "MONITOR_HOME": "home",
    "AMQP_URL": "amqp_url",
    "MONITOR_AMQP_PORT": "amqp_port",
    "MONITOR_WORKERS": "workers",
    "MONITOR_ALLOW_PRIVATE": "allow_private",
    "MONITOR_LOG_LEVEL": "log_level",
    "MONITOR_WEB_BIND": "web_bind",
    "MONITOR_WEB_TOKEN": "web_token",
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _coerce(name: str, value: object, kind: type) -> object:
    """Convert a raw TOML or environment value to the field's type, or explain why not."""
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(value)
        if kind is Path:
            return Path(str(value)).expanduser()
        if kind is int:
            return int(value)
        if kind is float:
            result = float(value)
            if result != result or result in (float("inf"), float("-inf")):
                raise ValueError(value)
            return result
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {value!r} is not a valid {kind.__name__}") from None


def _source(key: str) -> str:
    """How the user names a setting: its environment variable when it has one."""
    names = [env for env, field in _ENV.items() if field == key]
    return f"{key} ({names[0]})" if names else key


def _field_types() -> dict[str, type]:
    hints: dict[str, type] = {"home": Path, "amqp_url": str, "amqp_port": int}
    for f in dataclasses.fields(Config):
        if f.name not in hints:
            hints[f.name] = type(f.default)
    return hints


def config_file(environ: dict[str, str] | None = None) -> Path:
    """The TOML file's path: ``MONITOR_CONFIG``, or ``monitor.toml`` in the working directory."""
    return Path((os.environ if environ is None else environ).get("MONITOR_CONFIG", "monitor.toml"))


def load(environ: dict[str, str] | None = None) -> Config:
    """Build the configuration from defaults, ``MONITOR_CONFIG``/``monitor.toml`` and the environment."""
    environ = os.environ if environ is None else environ
    types = _field_types()
    values: dict[str, object] = {}

    path = config_file(environ)
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
        if "sinks" in data or "filters" in data:
            from monitor.sinks import declared  # imported when used: it loads the sink kinds

            try:
                values["sinks"], values["filters"] = declared.parse(data.pop("sinks", {}), data.pop("filters", []))
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None
        for key, value in data.items():
            if key not in types:
                raise ConfigError(f"{path}: unknown setting {key!r}")
            values[key] = _coerce(f"{path}: {key}", value, types[key])
    elif "MONITOR_CONFIG" in environ:
        raise ConfigError(f"MONITOR_CONFIG={path}: no such file")

    for env_name, key in _ENV.items():
        raw = environ.get(env_name)
        if raw is not None and raw != "":
            values[key] = _coerce(env_name, raw, types[key])
    if "home" in values:
        values["home"] = Path(values["home"])
    config = Config(**values)
    if config.parser not in PARSERS:
        raise ConfigError(f"parser: {config.parser!r} is not one of {', '.join(PARSERS)}")
    if config.web_bind and not re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]*):\d{1,5}", config.web_bind) \
            or config.web_bind and not 0 < int(config.web_bind.rpartition(":")[2]) < 65536:
        raise ConfigError(f"web_bind (MONITOR_WEB_BIND): {config.web_bind!r} is not HOST:PORT")
    if config.log_level.lower() not in LOG_LEVELS:
        raise ConfigError(f"log_level (MONITOR_LOG_LEVEL): {config.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
    for name, kind in types.items():
        low, high = BOUNDS.get(name, (0, float("inf")))
        value = getattr(config, name)
        if kind in (int, float) and value is not None and not low <= value <= high:
            limits = f"{low:g} to {high:g}" if high != float("inf") else f"at least {low:g}"
            raise ConfigError(f"{_source(name)}: {value!r} is out of range ({limits})")
    return dataclasses.replace(config, home=config.home.absolute())

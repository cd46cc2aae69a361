"""The ``monitor`` command line, run in-process against a fresh ``$MONITOR_HOME``.

Only store-backed commands are exercised (no broker, no supervisord, no network): URLs
on other hosts are added with ``MONITOR_ALLOW_PRIVATE=1``, which skips DNS resolution.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.store import open_store

ENV_VARS = ("MONITOR_HOME", "MONITOR_CONFIG", "AMQP_URL", "MONITOR_AMQP_PORT", "MONITOR_WORKERS", "MONITOR_ALLOW_PRIVATE")


@dataclass
class Result:
    code: int
    out: str
    err: str


class Monitor:
    """Runs ``monitor.cli.main`` with a given home and captures what it prints."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], home: Path) -> None:
        self.monkeypatch, self.capsys, self.home = monkeypatch, capsys, home

    def __call__(self, *argv: str, allow_private: bool = False) -> Result:
        self.capsys.readouterr()  # drop anything printed before
        self.monkeypatch.setenv("MONITOR_HOME", str(self.home))
        if allow_private:
            self.monkeypatch.setenv("MONITOR_ALLOW_PRIVATE", "1")
        else:
            self.monkeypatch.delenv("MONITOR_ALLOW_PRIVATE", raising=False)
        code = main(list(argv))
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def use_home(self, home: Path) -> None:
        """Point at ``home``, creating it as `monitor up` would (other commands never create one)."""
        self.home = home
        assert self("db", "upgrade").code == 0

    def add(self, url: str, *options: str) -> Result:
        result = self("watch", "add", url, *options, allow_private=True)
        assert result.code == 0, result.err
        return result

    def watches(self) -> list[dict]:
        """The watch list as ``watch list --json`` prints it."""
        result = self("watch", "list", "--json")
        assert result.code == 0, result.err
        return [json.loads(line) for line in result.out.splitlines()]


@pytest.fixture
def monitor(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Monitor:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no monitor.toml from the working directory
    cli = Monitor(monkeypatch, capsys, tmp_path / "home")
    cli.use_home(tmp_path / "home")
    return cli


def assert_usage_error(result: Result, message: str) -> None:
    """Exit code 2 and exactly one line on stderr that says ``message``."""
    assert result.code == 2
    assert result.err.count("\n") == 1 and result.err.startswith("monitor: error: "), result.err
    assert message in result.err
    assert result.out == ""


def watch_fields(watch: dict) -> tuple:
    return watch["url"], watch["interval"], watch["name"], watch["tag"], watch["enabled"]


# --- adding and refusing ---------------------------------------------------------------------
def test_add_and_list(monitor: Monitor) -> None:
    result = monitor.add("HTTPS://News.Example/#top", "--interval", "10m", "--name", "News", "--tag", "de")
    assert result.out.startswith("added watch 1: https://news.example/ every 10m")
    [watch] = monitor.watches()
    assert watch_fields(watch) == ("https://news.example/", "10m", "News", "de", True)
    assert watch["id"] == 1 and watch["last_status"] is None and watch["links_known"] == 0


def test_add_default_interval_is_five_minutes(monitor: Monitor) -> None:
    monitor.add("https://news.example/")
    assert monitor.watches()[0]["interval"] == "5m"


def test_list_json_prints_one_object_per_line(monitor: Monitor) -> None:
    for host in ("a", "b", "c"):
        monitor.add(f"https://{host}.example/")
    lines = monitor("watch", "list", "--json").out.splitlines()
    assert len(lines) == 3
    assert [json.loads(line)["url"] for line in lines] == ["https://a.example/", "https://b.example/", "https://c.example/"]


def test_list_of_nothing(monitor: Monitor) -> None:
    assert monitor("watch", "list", "--json").out == ""
    assert "no watches yet" in monitor("watch", "list").out


def test_add_loopback_with_allow_private(monitor: Monitor) -> None:
    assert monitor("watch", "add", "http://127.0.0.1:8000/", allow_private=True).code == 0
    assert [w["url"] for w in monitor.watches()] == ["http://127.0.0.1:8000/"]


@pytest.mark.parametrize("argv, message", [
    (("watch", "add", "example.com"), "has no scheme"),
    (("watch", "add", "ftp://example.com/"), "unsupported scheme 'ftp'"),
    (("watch", "add", "https://example.com/a b"), "contains whitespace"),
    (("watch", "add", "https://new.example/", "--interval", "5x"), "bad interval '5x'"),
    (("watch", "add", "https://new.example/", "--interval", "0s"), "must be at least 1s"),
    (("watch", "add", "https://new.example/", "--interval", "99999999999999999999d"), "bad interval"),
    (("watch", "add", "https://new.example/", "--interval", "400d"), "must be at most 366d"),
    (("watch", "add", "https://existing.example/"), "https://existing.example/ is already watched (watch 1)"),
    (("watch", "add", "HTTPS://EXISTING.example:443/#x"), "is already watched"),
    (("watch", "remove", "99"), "no watch with id 99"),
    (("watch", "remove", "https://unknown.example/"), "no watch with URL https://unknown.example/"),
    (("watch", "enable", "99"), "no watch with id 99"),
    (("watch", "disable", "99"), "no watch with id 99"),
    (("watch", "set", "99", "--interval", "5m"), "no watch with id 99"),
    (("watch", "set", "1"), "nothing to set: give --interval"),
    (("watch", "set", "1", "--interval=-5m"), "bad interval '-5m'"),
    (("watch", "set", "1", "--interval", "-5m"), "bad interval '-5m': must be at least 1s"),
    (("watch", "add", "https://new.example/", "--interval", "99999999999s"), "must be at most 366d"),
    (("links", "1", "--limit", "0"), "'0' is not a positive whole number"),
    (("links", "1", "--limit", "-1"), "'-1' is not a positive whole number"),
    (("links", "1", "--limit", "99999999999999999999999"), "is not a positive whole number"),
    (("watch", "add", "javascript:alert(1)"), "unsupported scheme 'javascript'"),
    (("watch", "add", "not a url"), "is not a web address"),
    (("links", "99"), "no watch with id 99"),
    (("alerts", "--watch", "99"), "no watch with id 99"),
    (("alerts", "--since", "5x"), "bad duration '5x'"),
])
def test_bad_input_is_a_usage_error_that_changes_nothing(monitor: Monitor, argv: tuple[str, ...], message: str) -> None:
    monitor.add("https://existing.example/", "--interval", "1h")
    before = monitor.watches()
    assert_usage_error(monitor(*argv, allow_private=True), message)
    assert monitor.watches() == before


HUGE = "99999999999999999999999"


@pytest.mark.parametrize("argv", [
    ("watch", "remove", HUGE), ("watch", "enable", HUGE), ("watch", "disable", HUGE),
    ("watch", "set", HUGE, "--interval", "5m"), ("watch", "recheck", HUGE), ("links", HUGE),
    ("alerts", "--watch", HUGE), ("proxy", "remove", HUGE), ("proxy", "test", HUGE),
    ("watch", "remove", "9" * 5000),  # past Python's own limit on converting digits
])
def test_an_id_past_any_row_is_one_line_not_a_traceback(monitor: Monitor, argv: tuple[str, ...]) -> None:
    monitor.add("https://existing.example/")
    result = monitor(*argv)
    assert_usage_error(result, "no ")
    assert "9223372036854775808" not in result.err, "the id named is the one typed"


@pytest.mark.parametrize("variable, value, message", [
    ("MONITOR_AMQP_PORT", "99999", "MONITOR_AMQP_PORT): 99999 is out of range (1 to 65535)"),
    ("MONITOR_AMQP_PORT", "http", "MONITOR_AMQP_PORT: 'http' is not a valid int"),
    ("MONITOR_LOG_LEVEL", "verbose", "'verbose' is not one of debug, info, warning, error"),
    ("MONITOR_WORKERS", "0", "MONITOR_WORKERS): 0 is out of range"),
    ("MONITOR_WORKERS", "-3", "MONITOR_WORKERS): -3 is out of range (1 to 256)"),
    ("MONITOR_AMQP_PORT", "-1", "MONITOR_AMQP_PORT): -1 is out of range (1 to 65535)"),
])
def test_a_bad_environment_value_is_one_line_and_exit_2(monitor: Monitor, monkeypatch: pytest.MonkeyPatch,
                                                        variable: str, value: str, message: str) -> None:
    monkeypatch.setenv(variable, value)
    for argv in (("status",), ("watch", "list"), ("up",)):
        result = monitor(*argv)
        assert result.code == 2 and result.err.count("\n") == 1 and message in result.err, result.err
        assert result.out == ""


def test_bad_numbers_in_the_settings_file_are_refused(monitor: Monitor, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    for line, message in (("fetch_read_timeout = nan", "is not a valid float"), ("delivery_limit = 0", "out of range"),
                          ("politeness_delay = -5", "politeness_delay: -5.0 is out of range (at least 0)")):
        (tmp_path / "bad.toml").write_text(line + "\n")
        monkeypatch.setenv("MONITOR_CONFIG", str(tmp_path / "bad.toml"))
        result = monitor("watch", "list")
        assert result.code == 2 and message in result.err, result.err


def test_a_command_never_creates_a_home_it_does_not_find(monitor: Monitor, tmp_path: Path) -> None:
    monitor.home = tmp_path / "elsewhere" / "var"
    for argv in (("status",), ("watch", "list"), ("watch", "add", "https://a.example/"), ("ctl", "status"),
                 ("dlq", "list"), ("proxy", "list")):
        result = monitor(*argv, allow_private=True)
        assert result.code == 2 and f"no monitor home at {monitor.home}" in result.err, (argv, result.err)
    assert not (tmp_path / "elsewhere").exists()


def test_status_and_ctl_exit_1_with_one_line_when_the_stack_is_stopped(monitor: Monitor) -> None:
    status = monitor("status")
    assert status.code == 1 and "processes:" in status.out
    assert status.err == f"monitor: the stack is not running (home {monitor.home}): `monitor up` starts it\n"
    assert monitor("status", "--json").code == 1
    ctl = monitor("ctl", "status")
    assert ctl.code == 1 and ctl.err.count("\n") == 1 and "not running" in ctl.err


@pytest.mark.parametrize("url", ["http://127.0.0.1/", "http://localhost:8080/", "http://10.0.0.1/", "http://[::1]/"])
def test_private_address_is_refused_without_allow_private(monitor: Monitor, url: str) -> None:
    assert_usage_error(monitor("watch", "add", url), "resolves to non-public address")
    assert monitor.watches() == []


def test_alerts_since_bad_duration_exits_2(monitor: Monitor) -> None:
    result = monitor("alerts", "--since", "5x")
    assert result.code == 2
    assert result.err == ("monitor: error: bad duration '5x': write a number and a unit, e.g. 30s, 5m, 2h, 1d\n")


# --- changing watches ------------------------------------------------------------------------------
def test_a_watch_is_found_by_its_url_as_typed_or_as_stored(monitor: Monitor) -> None:
    monitor.add("HTTPS://News.Example:443/#top")
    for ref in ("https://news.example/", "HTTPS://NEWS.example", "1"):
        assert monitor("watch", "disable", ref).out == "watch 1 disabled\n", ref


def test_disable_enable_set_and_remove(monitor: Monitor) -> None:
    monitor.add("https://news.example/")
    assert monitor("watch", "disable", "1").out == "watch 1 disabled\n"
    assert monitor.watches()[0]["enabled"] is False
    assert monitor("watch", "enable", "https://news.example/").out == "watch 1 enabled\n"
    assert monitor.watches()[0]["enabled"] is True
    assert monitor("watch", "set", "1", "--interval", "2h").out == "watch 1 now every 2h\n"
    assert monitor.watches()[0]["interval"] == "2h"
    assert monitor("watch", "remove", "1").out == "removed watch 1: https://news.example/\n"
    assert monitor.watches() == []


def test_set_name_and_tag_then_clear_them_and_bad_ones_change_nothing(monitor: Monitor) -> None:
    monitor.add("https://news.example/", "--name", "News", "--tag", "daily")
    result = monitor("watch", "set", "1", "--name", "Local news", "--tag", "local")
    assert result.code == 0, result.err
    assert result.out == "watch 1 now has name 'Local news'\nwatch 1 now has tag 'local'\n"
    assert (monitor.watches()[0]["name"], monitor.watches()[0]["tag"]) == ("Local news", "local")

    for option, value, reason in (("--name", "x" * 201, "name: at most 200 characters (got 201)"),
                                  ("--tag", "a\nb", "tag: one line"), ("--name", "a\tb", "name: one line")):
        result = monitor("watch", "set", "1", option, value, "--interval", "2h")
        assert (result.code, result.out) == (2, ""), option
        assert result.err.startswith(f"monitor: error: {reason}") and result.err.count("\n") == 1
    assert monitor("watch", "set", "1", "--name", "é" * 200).code == 0, "200 characters are enough"
    assert monitor.watches()[0]["interval"] == "5m", "a refused set changes nothing"

    assert monitor("watch", "set", "1", "--tag", "").out == "watch 1 now has no tag\n"
    assert monitor("watch", "set", "1", "--name", "").out == "watch 1 now has no name\n"
    assert (monitor.watches()[0]["name"], monitor.watches()[0]["tag"]) == (None, None)
    assert monitor("watch", "export").out.splitlines()[1] == "https://news.example/,5m,,,1"


def test_links_and_alerts_of_a_new_watch(monitor: Monitor) -> None:
    monitor.add("https://news.example/")
    assert monitor("links", "1").out == "no links known yet for watch 1 (last status: never checked)\n"
    assert monitor("links", "1", "--json").out == ""
    assert monitor("alerts", "--since", "1h").out == ""


# --- import and export ---------------------------------------------------------------------------
IMPORT_FILE = """\
# homepages to watch
https://plain.example/
https://csv.example/,10m,CSV Site,news

https://plain.example/
ftp://invalid.example/
https://bad-interval.example/,5x
HTTPS://CSV.example/#again
"""


def test_import_reports_added_duplicates_and_invalid(monitor: Monitor, tmp_path: Path) -> None:
    path = tmp_path / "watches.txt"
    path.write_text(IMPORT_FILE, encoding="utf-8")
    result = monitor("watch", "import", str(path), allow_private=True)
    assert result.code == 0
    assert result.out == "imported: 2 added, 2 skipped as duplicates, 2 refused as invalid\n"
    assert len(result.err.splitlines()) == 2
    assert "unsupported scheme 'ftp'" in result.err and "bad interval '5x'" in result.err
    assert [watch_fields(w) for w in monitor.watches()] == [
        ("https://plain.example/", "5m", None, None, True),
        ("https://csv.example/", "10m", "CSV Site", "news", True),
    ]


def test_import_with_a_header_row(monitor: Monitor, tmp_path: Path) -> None:
    path = tmp_path / "watches.csv"
    path.write_text("url,name,interval\nhttps://a.example/,A,1h\n", encoding="utf-8")
    assert monitor("watch", "import", str(path), allow_private=True).code == 0
    assert [watch_fields(w) for w in monitor.watches()] == [("https://a.example/", "1h", "A", None, True)]


def test_import_refuses_private_addresses_without_allow_private(monitor: Monitor, tmp_path: Path) -> None:
    path = tmp_path / "watches.txt"
    path.write_text("http://127.0.0.1/\n", encoding="utf-8")
    result = monitor("watch", "import", str(path))
    assert result.out == "imported: 0 added, 0 skipped as duplicates, 1 refused as invalid\n"
    assert monitor.watches() == []


def test_import_of_a_missing_file_is_a_usage_error(monitor: Monitor, tmp_path: Path) -> None:
    assert_usage_error(monitor("watch", "import", str(tmp_path / "nope.txt")), "cannot read")


def test_export_then_import_into_a_fresh_home_round_trips(monitor: Monitor, tmp_path: Path) -> None:
    monitor.add("https://a.example/", "--interval", "90m", "--name", "A, with comma", "--tag", "t1")
    monitor.add("https://b.example/path?q=1", "--interval", "1d")
    monitor.add("https://c.example/", "--name", 'Quote "c"')
    assert monitor("watch", "disable", "3").code == 0
    exported = monitor("watch", "export")
    assert exported.code == 0
    assert exported.out.splitlines()[0] == "url,interval,name,tag,enabled"
    original = [watch_fields(w) for w in monitor.watches()]

    path = tmp_path / "export.csv"
    path.write_text(exported.out, encoding="utf-8")
    monitor.use_home(tmp_path / "fresh-home")
    imported = monitor("watch", "import", str(path), allow_private=True)
    assert imported.out == "imported: 3 added, 0 skipped as duplicates, 0 refused as invalid\n"
    assert [watch_fields(w) for w in monitor.watches()] == original
    assert monitor("watch", "export").out == exported.out


# --- the store the CLI writes --------------------------------------------------------------------
def test_cli_writes_the_store_under_monitor_home(monitor: Monitor) -> None:
    monitor.add("https://news.example/", "--interval", "30s")
    store = open_store(monitor.home / "monitor.sqlite3")
    try:
        [watch] = store.list_watches()
    finally:
        store.close()
    assert (watch.url, watch.interval_s, watch.enabled) == ("https://news.example/", 30, True)


def test_the_demo_refuses_a_broker_another_stack_may_use(monitor, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its processes would consume the other stack's tasks and ack them as unknown watches."""
    monkeypatch.setenv("AMQP_URL", "amqp://guest:guest@127.0.0.1:1/%2F")
    result = monitor("demo")
    assert result.code == 2 and "unset AMQP_URL" in result.err and "--external-broker" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_watch_names_query_parameters_its_links_are_compared_without(monitor: Monitor) -> None:
    monitor.add("https://news.example/", "--ignore-param", "SID", "--ignore-param", "cb")
    [watch] = monitor.watches()
    assert watch["ignore_params"] == ["cb", "sid"] and watch["volatile_params"] == []
    assert "without ?sid" in monitor("watch", "set", "1", "--ignore-param", "sid").out
    assert monitor.watches()[0]["ignore_params"] == ["sid"]
    assert monitor("watch", "set", "1", "--ignore-param", "").code == 0
    assert monitor.watches()[0]["ignore_params"] == []
    assert_usage_error(monitor("watch", "set", "1", "--ignore-param", "a=b"),
                       "--ignore-param: 'a=b' is not a query parameter name")
    assert_usage_error(monitor("watch", "add", "https://other.example/", "--ignore-param", "x y", allow_private=True),
                       "--ignore-param: 'x y' is not a query parameter name")
    assert [w["url"] for w in monitor.watches()] == ["https://news.example/"], "nothing added on a bad name"


def test_a_new_watchs_name_and_tag_are_one_short_line(monitor: Monitor) -> None:
    assert_usage_error(monitor("watch", "add", "https://news.example/", "--name", "x" * 201, allow_private=True),
                       "name: at most 200 characters")
    assert_usage_error(monitor("watch", "add", "https://news.example/", "--tag", "a\nb", allow_private=True),
                       "tag: one line")
    assert monitor.watches() == []

"""Sinks and filters declared in the TOML file: checked when the configuration loads,
synced into the store (added, updated in place, removed), and guarded from the CLI."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from monitor.config import ConfigError, load
from monitor.sinks.declared import Declarations, DeclaredFilter, DeclaredSink, sync
from monitor.store import Declared, Store, open_store
from test_cli import Monitor, assert_usage_error, monitor  # noqa: F401 (fixture)

CHAT = """\
[sinks.team-chat]
kind = "webhook"
target = "https://hooks.example/T0/secret"
tag = "news"
secret = "s3cret"
headers = { X-Team = "news" }
"""
DESK = """\
[sinks.desk]
kind = "email"
target = "smtp://mail.example:587?to=desk@example.org&starttls=1"
digest = "15m"
watch = "https://News.example"
"""
EXCLUDE = """\
[[filters]]
rule = "exclude"
pattern = "sponsored"
tag = "news"
"""
SAME_SITE = """\
[[filters]]
rule = "same-site"
watch = 1
"""
DECLARED = CHAT + DESK + EXCLUDE + SAME_SITE


def _load(tmp_path: Path, text: str):
    path = tmp_path / "monitor.toml"
    path.write_text(text)
    return load({"MONITOR_CONFIG": str(path), "MONITOR_HOME": str(tmp_path / "home")})


def test_declared_sinks_and_filters_are_read_with_their_options(tmp_path: Path) -> None:
    config = _load(tmp_path, "workers = 3\n" + DECLARED)
    assert config.workers == 3
    assert config.sinks == (
        DeclaredSink("team-chat", "webhook", "https://hooks.example/T0/secret",
                     {"secret": "s3cret", "headers": {"X-Team": "news"}}, None, "news"),
        DeclaredSink("desk", "email", "smtp://mail.example:587?to=desk@example.org&starttls=1", {"digest": 900},
                     "https://news.example/", None))
    assert config.filters == (DeclaredFilter("exclude", "sponsored", None, "news"),
                              DeclaredFilter("same-site", "", 1, None))


@pytest.mark.parametrize("text, message", [
    ('[sinks.x]\nkind = "pager"\ntarget = "x"\n', "sinks.x: unknown sink kind 'pager'"),
    ('[sinks.x]\nkind = "webhook"\n', 'sinks.x: target = "..." is required'),
    ('[sinks.x]\nkind = "webhook"\ntarget = "ftp://h.example/"\n', "sinks.x: ftp://***: a webhook TARGET"),
    ('[sinks.x]\nkind = "webhook"\ntarget = "https://h.example/"\ndigest = "15m"\n',
     "sinks.x: webhook sinks take no digest option"),
    ('[sinks.x]\nkind = "email"\ntarget = "smtp://m.example?to=a@b.example"\ndigest = "soon"\n',
     "sinks.x: digest: bad interval 'soon'"),
    ('[sinks.x]\nkind = "email"\ntarget = "smtp://m.example?to=a@b.example"\nsecret = "s"\n',
     "sinks.x: email sinks take no secret option"),
    ('[sinks.x]\nkind = "webhook"\ntarget = "https://h.example/"\nheaders = { "Bad Name" = "v" }\n',
     "sinks.x: header 'Bad Name'"),
    ('[sinks.x]\nkind = "webhook"\ntarget = "https://h.example/"\nwatch = 1\ntag = "t"\n', "give watch or tag, not both"),
    ('[sinks.x]\nkind = "webhook"\ntarget = "https://h.example/"\nwatch = -2\n', "watch is a watch id"),
    ('[sinks.x]\nkind = "webhook"\ntarget = "https://h.example/"\nwatch = "not a url"\n', "sinks.x: watch: "),
    ('[sinks.x]\nkind = "webhook"\ntarget = "https://h.example/"\nfrequency = 3\n', "sinks.x: unknown key 'frequency'"),
    ('[sinks."bad name"]\nkind = "webhook"\ntarget = "https://h.example/"\n', "a sink name is letters"),
    ('sinks = 3\n', "sinks: write each sink as a table"),
    ('[[filters]]\nrule = "drop"\npattern = "x"\n', "filters #1: unknown rule 'drop'"),
    ('[[filters]]\nrule = "include"\n', "filters #1: include: an empty pattern"),
    ('[[filters]]\nrule = "exclude"\npattern = "a"\n[[filters]]\nrule = "exclude"\npattern = "/[/"\n',
     "filters #2: exclude: bad regular expression"),
    ('[[filters]]\nrule = "same-site"\npattern = "x"\n', "filters #1: same-site takes no pattern"),
    ('[filters]\nrule = "same-site"\n', "filters: write each filter as a table, [[filters]]"),
])
def test_a_bad_declaration_is_one_line_naming_the_file_and_the_entry(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, text)
    assert message in str(refused.value) and str(refused.value).startswith(str(tmp_path / "monitor.toml"))
    assert "\n" not in str(refused.value)


def _rows(store) -> tuple[dict, list]:
    sinks = {s.name: (s.kind, s.target, s.options, s.watch_id, s.tag, s.declared) for s in store.list_sinks()}
    declared = store.declared_filter_ids()
    return sinks, [(r.rule, r.pattern, r.watch_id, r.tag, r.id in declared) for r in store.list_filters()]


def test_sync_adds_updates_in_place_and_removes_only_what_the_file_declares(tmp_path: Path) -> None:
    config = _load(tmp_path, DECLARED)
    store = open_store(config.db_path)
    store.add_sink("mine", "webhook", "https://mine.example/", {}, None, None, 0.0)
    store.add_filter("include", "election", None, None, 0.0)
    changes, problems = sync(store, config, 1.0)
    assert problems == ["sink desk left out: no watch with URL https://news.example/",
                        "filter same-site left out: no watch with id 1"]
    assert sorted(changes) == ["filter exclude sponsored added", "sink team-chat declared"]

    watch = store.add_watch("https://news.example/", 300, tag="news")
    assert sync(store, config, 2.0).problems == []
    sinks, rules = _rows(store)
    assert sinks["desk"] == ("email", config.sinks[1].target, {"digest": 900}, watch.id, None, True)
    assert sinks["mine"][-1] is False and rules == [("include", "election", None, None, False),
                                                    ("exclude", "sponsored", None, "news", True),
                                                    ("same-site", "", watch.id, None, True)]
    assert sync(store, config, 3.0) == ([], []), "nothing changed: nothing written"

    store.conn.execute("INSERT INTO alerts (alert_id, watch_id, url, text, first_seen) VALUES ('1-a', ?, 'u', 't', 4)",
                       (watch.id,))
    store.delivered("team-chat", ["1-a"], 5.0)
    signature = store.filters_signature()
    edited = _load(tmp_path, CHAT.replace("T0/secret", "T1/new") + EXCLUDE.replace("sponsored", "advert") + SAME_SITE)
    changes, _ = sync(store, edited, 6.0)
    assert sorted(changes) == ["filter exclude advert added", "filter exclude sponsored removed", "sink desk removed",
                               "sink team-chat declared"]
    sinks, rules = _rows(store)
    assert sorted(sinks) == ["mine", "team-chat"] and sinks["team-chat"][1] == "https://hooks.example/T1/new"
    assert {s.name: s.delivered for s in store.list_sinks()}["team-chat"] == 1, "the delivery history stays"
    assert ("exclude", "advert", None, "news", True) in rules and store.filters_signature() != signature
    store.close()


def test_a_cli_sink_under_a_declared_name_becomes_the_declared_one(tmp_path: Path) -> None:
    config = _load(tmp_path, CHAT)
    store = open_store(config.db_path)
    store.add_sink("team-chat", "webhook", "https://old.example/", {}, None, None, 0.0)
    sync(store, config, 1.0)
    sinks, _ = _rows(store)
    assert sinks["team-chat"][1] == "https://hooks.example/T0/secret" and sinks["team-chat"][-1] is True
    with pytest.raises(Declared):
        store.remove_sink("team-chat")
    assert "team-chat" in _rows(store)[0], "refused: nothing removed"
    store.close()


class Log:
    """Keeps what is logged: ``(level, event, fields)``."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict]] = []

    def __getattr__(self, level: str):
        return lambda event, **fields: self.lines.append((level, event, fields))


@pytest.fixture
def declaring(tmp_path: Path, monkeypatch) -> Iterator[tuple[Path, Store]]:
    """A TOML file declaring the team-chat sink, and the store of the home it configures."""
    path = tmp_path / "monitor.toml"
    monkeypatch.setenv("MONITOR_CONFIG", str(path))
    monkeypatch.setenv("MONITOR_HOME", str(tmp_path / "home"))
    path.write_text(CHAT)
    store = open_store(load().db_path)
    yield path, store
    store.close()


def test_a_running_process_syncs_when_the_file_changes_and_keeps_going_on_a_bad_edit(declaring) -> None:
    path, store = declaring
    log = Log()
    declarations = Declarations(path, store, log)
    declarations.refresh(1.0)
    assert sorted(_rows(store)[0]) == ["team-chat"]
    declarations.refresh(1.5)
    assert log.lines == [("info", "configuration applied", {"change": "sink team-chat declared"})], "once per edit"

    path.write_text(CHAT + "[sinks.chat2]\nkind = \"webhook\"\ntarget = \"https://c.example/\"\n")
    declarations.refresh(2.0)
    assert sorted(_rows(store)[0]) == ["chat2", "team-chat"]
    path.write_text("[sinks.chat2]\nkind = \"pager\"\ntarget = \"x\"\n")
    declarations.refresh(3.0)
    level, event, fields = log.lines[-1]
    assert (level, event) == ("error", "configuration file not applied") and "unknown sink kind" in fields["reason"]
    assert sorted(_rows(store)[0]) == ["chat2", "team-chat"], "a bad edit changes nothing"
    path.write_text("workers = 2\n")
    declarations.refresh(4.0)
    assert _rows(store) == ({}, []), "none declared any more: none left"


def test_a_process_started_where_there_is_no_file_leaves_the_declared_rows_alone(declaring) -> None:
    path, store = declaring
    Declarations(path, store, Log()).refresh(1.0)
    path.unlink()
    restarted = Declarations(path, store, Log())  # e.g. `monitor up` run from another directory
    restarted.refresh(2.0)
    assert sorted(_rows(store)[0]) == ["team-chat"]
    path.write_text("workers = 2\n")
    restarted.refresh(3.0)
    assert _rows(store) == ({}, []), "a file that says so still removes them"


def test_the_cli_refuses_to_remove_a_declared_sink_or_filter_and_says_where_it_is(monitor: Monitor) -> None:
    toml = monitor.home.parent / "monitor.toml"
    toml.write_text(CHAT + EXCLUDE)
    monitor.monkeypatch.setenv("MONITOR_CONFIG", str(toml))
    listed = monitor("sink", "list", "--json")
    assert listed.code == 0, listed.err
    [sink] = [json.loads(line) for line in listed.out.splitlines()]
    assert (sink["name"], sink["declared"], sink["target"]) == ("team-chat", True, "https://hooks.example/***")
    assert_usage_error(monitor("sink", "remove", "team-chat"), f"sink team-chat is declared in {toml}: remove it there")
    [rule] = [json.loads(line) for line in monitor("filter", "list", "--json").out.splitlines()]
    assert rule["declared"] and rule["pattern"] == "sponsored"
    assert_usage_error(monitor("filter", "remove", str(rule["id"])), f"filter {rule['id']} is declared in {toml}")
    assert "monitor.toml" in monitor("filter", "list").out, "the table says where a rule comes from"

    added = monitor("sink", "add", "email", "smtp://m.example?to=a@b.example", "--name", "digest", "--digest", "1h")
    assert added.code == 0 and "a digest mail every 1h" in added.out
    assert "email, digest 1h" in monitor("sink", "list").out
    assert_usage_error(monitor("sink", "add", "webhook", "https://h.example/", "--digest", "1h"),
                       "webhook sinks take no digest option")
    assert_usage_error(monitor("sink", "add", "email", "smtp://m.example?to=a@b.example", "--digest", "0m"),
                       "--digest: bad interval '0m'")
    assert monitor("sink", "remove", "digest").code == 0


def test_a_command_run_where_there_is_no_toml_file_leaves_the_declared_sinks_alone(monitor: Monitor) -> None:
    toml = monitor.home.parent / "monitor.toml"
    toml.write_text(CHAT)
    monitor.monkeypatch.setenv("MONITOR_CONFIG", str(toml))
    assert monitor("sink", "list").code == 0
    monitor.monkeypatch.delenv("MONITOR_CONFIG")
    monitor.monkeypatch.chdir(monitor.home)  # no monitor.toml here
    [sink] = [json.loads(line) for line in monitor("sink", "list", "--json").out.splitlines()]
    assert sink["name"] == "team-chat" and sink["declared"]

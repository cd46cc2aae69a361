"""Numbered migrations: applied in order, recorded, idempotent, atomic per file."""
from __future__ import annotations

import sqlite3

import pytest

from monitor import cli
from monitor.store import MIGRATIONS_DIR, Store, upgrade


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_upgrade_applies_every_file_once(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    applied = upgrade(store.conn)
    assert applied[0] == "0001_initial"
    assert {"watches", "links", "alerts", "schema_version"} <= _tables(store.conn)
    assert upgrade(store.conn) == []
    versions = [row[0] for row in store.conn.execute("SELECT version FROM schema_version ORDER BY version")]
    assert versions == sorted(versions) and len(versions) == len(applied)


def test_a_new_migration_is_applied_and_a_broken_one_changes_nothing(tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    for path in MIGRATIONS_DIR.glob("*.sql"):
        (migrations / path.name).write_text(path.read_text())
    store = Store(tmp_path / "db.sqlite3")
    upgrade(store.conn, migrations)

    (migrations / "0900_notes.sql").write_text("-- notes on watches\nALTER TABLE watches ADD COLUMN note TEXT;\n")
    assert upgrade(store.conn, migrations) == ["0900_notes"]
    assert "note" in {row[1] for row in store.conn.execute("PRAGMA table_info(watches)")}

    (migrations / "0901_broken.sql").write_text("CREATE TABLE half (x INTEGER);\nTHIS IS NOT SQL;\n")
    with pytest.raises(sqlite3.OperationalError):
        upgrade(store.conn, migrations)
    assert "half" not in _tables(store.conn), "a failing migration must leave no trace"
    assert store.conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == 900


def test_db_upgrade_command_reports_then_is_a_no_op(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MONITOR_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["db", "upgrade"]) == 0
    assert "applied: 0001_initial" in capsys.readouterr().out
    assert cli.main(["db", "upgrade"]) == 0
    assert "up to date" in capsys.readouterr().out

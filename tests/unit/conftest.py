"""Fixtures the unit tests share."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from monitor.store import Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A fresh store on a real SQLite file, closed after the test."""
    opened = open_store(tmp_path / "db.sqlite3")
    yield opened
    opened.close()

"""Durations as users write them (``monitor.durations``)."""
from __future__ import annotations

import pytest

from monitor.durations import format_age, format_duration, parse_duration


@pytest.mark.parametrize("text, seconds", [
    ("30s", 30), ("5m", 300), ("2h", 7200), ("1d", 86400), ("90m", 5400), (" 5 m ", 300), ("05m", 300),
])
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5x", "", "5", "m", "1.5h", "5M", "+5m", "5mm", "5 minutes"])
def test_parse_duration_refuses_malformed(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == f"bad interval {text!r}: write a number and a unit, e.g. 30s, 5m, 2h, 1d"


def test_parse_duration_refuses_none() -> None:
    with pytest.raises(ValueError, match="bad interval None"):
        parse_duration(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["0s", "-5m", "-0s", "- 1d"])
def test_parse_duration_refuses_zero_and_negative_values_alike(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == f"bad interval {text!r}: must be at least 1s"


@pytest.mark.parametrize("text", ["99999999999s", "100000d", "1" * 200 + "s"])
def test_parse_duration_says_at_most_366d_however_many_digits(text: str) -> None:
    with pytest.raises(ValueError, match="must be at most 366d"):
        parse_duration(text)


def test_parse_duration_minimum() -> None:
    assert parse_duration("1m", minimum=60) == 60
    with pytest.raises(ValueError, match="must be at least 1m"):
        parse_duration("59s", minimum=60)


@pytest.mark.parametrize("seconds, text", [
    (0, "0s"), (1, "1s"), (59, "59s"), (60, "1m"), (90, "90s"), (300, "5m"), (3600, "1h"),
    (5400, "90m"), (86400, "1d"), (90000, "25h"), (172800, "2d"), (300.7, "5m"),
])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("text", ["30s", "5m", "2h", "1d", "90m", "25h"])
def test_format_parse_round_trip(text: str) -> None:
    assert format_duration(parse_duration(text)) == text


@pytest.mark.parametrize("seconds, text", [
    (None, "-"), (-5, "0s ago"), (42, "42s ago"), (60, "1m ago"), (3599, "59m ago"), (3600, "1h ago"),
    (86399, "23h ago"), (86400, "1d ago"),
])
def test_format_age(seconds: float | None, text: str) -> None:
    assert format_age(seconds) == text

"""The JSON-lines sink: whole lines, even after a crash cut the last one."""
from __future__ import annotations

import json

from monitor.messages import Alert
from monitor.sinks import JsonLinesSink


def _alert(n: int) -> Alert:
    return Alert(f"1-code{n}", 1, "https://news.example/", f"https://news.example/{n}", f"Story {n}", 1.0)


def test_a_torn_last_line_does_not_swallow_the_next_alert(tmp_path):
    sink = JsonLinesSink(tmp_path / "alerts.jsonl")
    sink.deliver([_alert(1)])
    with open(sink.path, "ab") as handle:
        handle.write(b'{"alert_id": "1-torn", "url": "https://ne')  # a crash mid-write
    sink.deliver([_alert(2), _alert(3)])
    lines = sink.path.read_bytes().splitlines()
    assert [json.loads(line)["alert_id"] for line in (lines[0], lines[2], lines[3])] == ["1-code1", "1-code2", "1-code3"]
    assert sink.delivered({"1-code2", "1-torn", "1-other"}) == {"1-code2"}


def test_nothing_to_deliver_creates_nothing(tmp_path):
    sink = JsonLinesSink(tmp_path / "alerts.jsonl")
    sink.deliver([])
    assert not sink.path.exists() and sink.delivered({"x"}) == set()


def test_the_file_is_rotated_past_its_size_and_delivered_still_sees_the_previous_one(tmp_path):
    sink = JsonLinesSink(tmp_path / "alerts.jsonl", max_bytes=300)
    for n in range(10):
        sink.deliver([_alert(n)])
    assert sink.path.stat().st_size < 300 + 200 and sink.previous.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["alerts.jsonl", "alerts.jsonl.1"]
    latest = [json.loads(line)["alert_id"] for path in (sink.previous, sink.path) for line in path.read_bytes().splitlines()]
    assert latest[-1] == "1-code9" and sink.delivered(set(latest)) == set(latest)

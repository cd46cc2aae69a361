"""``monitor watch import`` of urlwatch, OPML, changedetection.io, plain lists and CSV:
each reader on a hand-written sample file, then the real CLI importing each into a real
SQLite home, and hostile files refused whole with one line."""
from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.imports import ImportFileError, Row, detect, read
from test_cli import ENV_VARS, Monitor, assert_usage_error, monitor, watch_fields  # noqa: F401 (fixture)

URLS_YAML = """\
# my urlwatch jobs
name: Example News
url: https://news.example/
filter:
  - css: main
  - html2text
diff_tool: wdiff -n
---
url: https://blog.example/
tags:
  - personal
  - weekly
enabled: false
---
name: Kernel version
command: uname -r
---
name: Single-page app
navigate: https://app.example/
---
name: Shop
url: https://shop.example/
use_browser: true
max_tries: 3
---
name: Incomplete
---
"""

OPML = b"""\
<?xml version="1.0" encoding="UTF-8"?>
<opml version="2.0">
  <head><title>Subscriptions from a feed reader</title></head>
  <body>
    <outline text="Tech" title="Tech">
      <outline text="Python" title="Python">
        <outline type="rss" text="Python Insider" title="Python Insider"
                 xmlUrl="https://python.example/feeds/posts/default" htmlUrl="https://python.example/"/>
      </outline>
      <outline type="rss" text="LWN.net" xmlUrl="https://lwn.example/headlines/rss" htmlUrl="https://lwn.example/"/>
    </outline>
    <outline type="rss" text="Feed only &amp; more" xmlUrl="https://feeds.example/only.xml"/>
  </body>
</opml>
"""

URL_WATCHES = {
    "note": "Hello! If you change this file manually, please be sure to restart your changedetection.io instance!",
    "watching": {
        "0f4e5a3c-6d2b-4c1e-9a57-2f1b8e3d7c10": {
            "url": "https://news.example/", "title": "News", "paused": False, "processor": "text_json_diff",
            "tags": ["5d0b1e6f-2a4c-4f7e-8b3d-9c1a2e4f6b80", "a7c3e9f1-4b2d-4e6a-8f0c-1d3b5a7c9e21"],
            "time_between_check": {"weeks": None, "days": None, "hours": 1, "minutes": 30, "seconds": None},
            "time_between_check_use_default": False, "include_filters": [], "fetch_backend": "system"},
        "7b9d2c4e-1f3a-4d5b-8c6e-0a2b4c6d8e11": {
            "url": "https://blog.example/", "title": None, "tags": [], "paused": True,
            "time_between_check": {"weeks": None, "days": None, "hours": None, "minutes": None, "seconds": None},
            "time_between_check_use_default": True},
        "c2e4a6b8-3d5f-4a7c-9e1b-5f7d9b1c3e22": {
            "url": "https://shop.example/item/42", "title": "Shop", "tags": ["e1f2a3b4-0000-4000-8000-000000000000"],
            "include_filters": ["#price"], "fetch_backend": "html_webdriver", "processor": "restock_diff",
            "time_between_check": {"weeks": None, "days": 2, "hours": None, "minutes": None, "seconds": None},
            "time_between_check_use_default": False},
        "d4f6b8c0-5e7a-4b9d-8f2c-6a8c0e2f4a33": {"title": "No address"},
    },
    "settings": {
        "application": {"tags": {
            "5d0b1e6f-2a4c-4f7e-8b3d-9c1a2e4f6b80": {"title": "News", "uuid": "5d0b1e6f-2a4c-4f7e-8b3d-9c1a2e4f6b80"},
            "a7c3e9f1-4b2d-4e6a-8f0c-1d3b5a7c9e21": {"title": "Daily", "uuid": "a7c3e9f1-4b2d-4e6a-8f0c-1d3b5a7c9e21"}}},
        "requests": {"time_between_check": {"weeks": None, "days": None, "hours": 3, "minutes": None, "seconds": None}},
    },
}

CHANGEDETECTION_LIST = """\
https://news.example/ news, daily
https://plain.example/

https://tagged.example/ shop
"""

# Ten levels of ten aliases each: 10**10 values once expanded, 100 written.
YAML_BOMB = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]\n" for n in range(1, 10)) + "url: https://bomb.example/\n"

BILLION_LAUGHS_OPML = b"""\
<?xml version="1.0"?>
<!DOCTYPE opml [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<opml version="2.0"><body><outline text="&lol9;" htmlUrl="https://laughs.example/"/></body></opml>
"""


def summary(added: int, duplicates: int, refused: int) -> str:
    return f"imported: {added} added, {duplicates} skipped as duplicates, {refused} refused as invalid\n"


# --- each reader --------------------------------------------------------------------------------
def test_urlwatch_jobs_map_url_name_tags_and_enabled() -> None:
    rows = read(URLS_YAML.encode(), "urls.yaml")
    assert rows == [
        Row("job 1 'Example News'", "https://news.example/", "Example News", notes=["not mapped: filter, diff_tool"]),
        Row("job 2", "https://blog.example/", tag="personal", enabled=False,
            notes=["only its first tag is kept (a watch has one): 'weekly' not mapped"]),
        Row("job 3 'Kernel version'", name="Kernel version",
            refused="command jobs cannot be watched: this monitor fetches web pages and runs no commands"),
        Row("job 4 'Single-page app'", "https://app.example/", "Single-page app",
            notes=["it is fetched without a browser: links that only its scripts add are not seen"]),
        Row("job 5 'Shop'", "https://shop.example/", "Shop",
            notes=["it is fetched without a browser: links that only its scripts add are not seen", "not mapped: max_tries"]),
        Row("job 6 'Incomplete'", name="Incomplete", refused="it has no url"),
    ]
    assert all(row.interval is None for row in rows)  # urlwatch has no interval per job


def test_opml_takes_the_homepage_the_title_and_the_innermost_folder() -> None:
    rows = read(OPML, "subscriptions.opml")
    assert rows == [
        Row("line 7", "https://python.example/", "Python Insider", "Python"),
        Row("line 10", "https://lwn.example/", "LWN.net", "Tech"),
        Row("line 12", "https://feeds.example/only.xml", "Feed only & more",
            notes=["it has no htmlUrl, so its feed is watched: checks fail unless that address serves an HTML page"]),
    ]


def test_opml_in_the_encoding_it_declares() -> None:
    opml = '<?xml version="1.0" encoding="ISO-8859-1"?>\n<opml><body><outline title="Café" htmlUrl="https://cafe.example/"/></body></opml>'
    [row] = read(opml.encode("latin-1"), "export.xml")
    assert row.name == "Café"


def test_changedetection_export_maps_title_tags_paused_and_intervals() -> None:
    rows = read(json.dumps(URL_WATCHES).encode(), "url-watches.json")
    assert rows == [
        Row("watch 0f4e5a3c-6d2b-4c1e-9a57-2f1b8e3d7c10 'News'", "https://news.example/", "News", "News", "90m",
            notes=["only its first tag is kept (a watch has one): 'Daily' not mapped"]),
        Row("watch 7b9d2c4e-1f3a-4d5b-8c6e-0a2b4c6d8e11", "https://blog.example/", interval="3h", enabled=False),
        Row("watch c2e4a6b8-3d5f-4a7c-9e1b-5f7d9b1c3e22 'Shop'", "https://shop.example/item/42", "Shop", interval="2d",
            notes=["tag 'e1f2a3b4-0000-4000-8000-000000000000' is not among the export's tags: not mapped",
                   "not mapped: include_filters, fetch_backend (a browser), processor 'restock_diff'"]),
        Row("watch d4f6b8c0-5e7a-4b9d-8f2c-6a8c0e2f4a33 'No address'", name="No address", refused="it has no url"),
    ]


def test_changedetection_older_exports_and_odd_intervals() -> None:
    export = {"watching": {
        "u1": {"url": "https://old.example/", "tag": "Legacy, Old", "time_between_check": {"hours": "2"},
               "time_schedule_limit": {"enabled": False, "monday": {"enabled": True, "start_time": "00:00"}}},
        "u2": {"url": "https://far.example/", "time_between_check": {"weeks": 10 ** 4000}},
        "u3": {"url": "https://odd.example/", "time_between_check": {"minutes": "soon"}, "method": "POST"},
    }}
    assert read(json.dumps(export).encode(), "backup.json") == [
        Row("watch u1", "https://old.example/", tag="Legacy", interval="2h",
            notes=["only its first tag is kept (a watch has one): 'Old' not mapped"]),
        Row("watch u2", "https://far.example/", interval="31622401s"),  # just past 366d: the import refuses it
        Row("watch u3", "https://odd.example/",
            notes=["time_between_check not understood: the default interval is used", "not mapped: method 'POST'"]),
    ]


def test_urlwatch_anchors_and_aliases_of_a_real_file_are_fine() -> None:
    text = b"name: &shop Shop\nurl: https://shop.example/\nfilter: &main [css: main, html2text]\ndiff_filter: *main\n"
    assert read(text, "urls.yml") == [Row("job 1 'Shop'", "https://shop.example/", "Shop",
                                          notes=["not mapped: filter, diff_filter"])]


def test_changedetection_url_list_with_tags() -> None:
    rows = read(CHANGEDETECTION_LIST.encode(), "urls.txt")
    assert [(row.where, row.url, row.tag, row.notes) for row in rows] == [
        ("line 1", "https://news.example/", "news", ["only its first tag is kept (a watch has one): 'daily' not mapped"]),
        ("line 2", "https://plain.example/", None, []),
        ("line 4", "https://tagged.example/", "shop", []),
    ]


def test_a_forced_list_takes_each_whole_line_as_the_url() -> None:
    text = b"# a comment\nhttps://a.example/?ids=1,2\n"
    assert read(text, "x.txt", "list") == [Row("line 2", "https://a.example/?ids=1,2")]
    assert read(text, "x.txt", "csv")[0].url == "https://a.example/?ids=1"  # a CSV cell ends at the comma


@pytest.mark.parametrize("filename, content, expected", [
    ("watches.txt", "https://a.example/\nhttps://b.example/\n", "csv"),
    ("watches.txt", "https://a.example/,10m,A,news\n", "csv"),
    ("watches.txt", "https://a.example/,1h,\"A site, really\",t\n", "csv"),
    ("watches", "https://a.example/ news, tech\n", "changedetection"),
    ("urls.yaml", "https://a.example/\n", "urlwatch"),
    ("urls", "---\nurl: https://a.example/\n", "urlwatch"),
    ("export", "\ufeff<?xml version='1.0'?><opml/>", "opml"),
    ("feeds.xml", "", "opml"),
    ("backup", '  {"watching": {}}', "changedetection"),
    ("watches.csv", "https://a.example/ not a tag\n", "csv"),
])
def test_the_format_is_detected_from_extension_and_content(filename: str, content: str, expected: str) -> None:
    assert detect(filename, content.encode()) == expected


# --- hostile and broken files ---------------------------------------------------------------------
@pytest.mark.timeout(20)
@pytest.mark.parametrize("filename, content, message", [
    ("urls.yaml", YAML_BOMB.encode(), "aliases expand to more than 100000 values"),
    ("urls.yaml", b"url: &a [*a]\n", "refers to itself"),
    ("urls.yaml", b"[" * 20000, "nested too deeply"),
    ("urls.yaml", b"url: [unclosed\n", "not valid YAML: "),
    ("feeds.opml", BILLION_LAUGHS_OPML, "it has a DOCTYPE (opml)"),
    ("feeds.opml", b'<?xml version="1.0"?><!DOCTYPE opml SYSTEM "file:///etc/passwd"><opml/>', "it has a DOCTYPE"),
    ("feeds.opml", b"<opml><body><outline></body></opml>", "not well-formed XML: mismatched tag: line 1"),
    ("bookmarks.html", b"<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><DT><A HREF='https://a.example/'>a</A></DL>",
     "not OPML: its DOCTYPE is NETSCAPE-Bookmark-file-1"),
    ("bookmarks.html", b"<html><body><a href='https://a.example/'>a</a></body></html>", "not OPML: its root element is <html>"),
    ("url-watches.json", b'{"watching": [', "not valid JSON: "),
    ("url-watches.json", b'{"watching": ' + b"[" * 100000 + b"]" * 100000 + b"}", "nested too deeply"),
    ("url-watches.json", b'{"settings": {}}', 'no "watching" object'),
    ("watches.txt", b"https://caf\xe9.example/\n", "not UTF-8 text (invalid continuation byte at byte 11)"),
])
def test_a_hostile_or_broken_file_is_refused_whole(filename: str, content: bytes, message: str) -> None:
    with pytest.raises(ImportFileError) as raised:
        read(content, filename)
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("filename, content", [("urls.yaml", YAML_BOMB.encode()), ("feeds.opml", BILLION_LAUGHS_OPML)])
def test_the_cli_refuses_a_bomb_with_one_line_and_adds_nothing(monitor: Monitor, tmp_path: Path, filename: str,
                                                                content: bytes) -> None:
    path = tmp_path / filename
    path.write_bytes(content)
    result = monitor("watch", "import", str(path), allow_private=True)
    assert_usage_error(result, f"cannot read {path}: ")
    assert monitor.watches() == []


# --- the CLI, each format into a real home -------------------------------------------------------
def import_file(monitor: Monitor, path: Path, content: str | bytes, *options: str):
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    result = monitor("watch", "import", str(path), *options, allow_private=True)
    assert result.code == 0, result.err
    return result


def test_cli_imports_urlwatch_and_reports_what_it_could_not_map(monitor: Monitor, tmp_path: Path) -> None:
    result = import_file(monitor, tmp_path / "urls.yaml", URLS_YAML)
    assert result.out == summary(4, 0, 2)
    assert result.err.splitlines() == [
        "job 1 'Example News': not mapped: filter, diff_tool",
        "job 2: only its first tag is kept (a watch has one): 'weekly' not mapped",
        "job 3 'Kernel version': refused: command jobs cannot be watched: this monitor fetches web pages and runs no commands",
        "job 4 'Single-page app': it is fetched without a browser: links that only its scripts add are not seen",
        "job 5 'Shop': it is fetched without a browser: links that only its scripts add are not seen",
        "job 5 'Shop': not mapped: max_tries",
        "job 6 'Incomplete': refused: it has no url",
    ]
    assert [watch_fields(w) for w in monitor.watches()] == [
        ("https://news.example/", "5m", "Example News", None, True),
        ("https://blog.example/", "5m", None, "personal", False),
        ("https://app.example/", "5m", "Single-page app", None, True),
        ("https://shop.example/", "5m", "Shop", None, True),
    ]


def test_cli_imports_opml(monitor: Monitor, tmp_path: Path) -> None:
    result = import_file(monitor, tmp_path / "feedly.opml", OPML)
    assert result.out == summary(3, 0, 0)
    assert result.err == "line 12: it has no htmlUrl, so its feed is watched: checks fail unless that address serves an HTML page\n"
    assert [watch_fields(w) for w in monitor.watches()] == [
        ("https://python.example/", "5m", "Python Insider", "Python", True),
        ("https://lwn.example/", "5m", "LWN.net", "Tech", True),
        ("https://feeds.example/only.xml", "5m", "Feed only & more", None, True),
    ]


def test_cli_imports_changedetection_watches(monitor: Monitor, tmp_path: Path) -> None:
    result = import_file(monitor, tmp_path / "url-watches.json", json.dumps(URL_WATCHES, indent=2))
    assert result.out == summary(3, 0, 1)
    assert "watch d4f6b8c0-5e7a-4b9d-8f2c-6a8c0e2f4a33 'No address': refused: it has no url" in result.err.splitlines()
    assert ("watch c2e4a6b8-3d5f-4a7c-9e1b-5f7d9b1c3e22 'Shop': not mapped: include_filters, fetch_backend (a browser), "
            "processor 'restock_diff'") in result.err.splitlines()
    assert [watch_fields(w) for w in monitor.watches()] == [
        ("https://news.example/", "90m", "News", "News", True),
        ("https://blog.example/", "3h", None, None, False),
        ("https://shop.example/item/42", "2d", "Shop", None, True),
    ]


def test_cli_imports_a_changedetection_url_list_and_skips_what_is_watched(monitor: Monitor, tmp_path: Path) -> None:
    monitor.add("https://plain.example/")
    result = import_file(monitor, tmp_path / "list.txt", CHANGEDETECTION_LIST)
    assert result.out == summary(2, 1, 0)
    assert [watch_fields(w) for w in monitor.watches()] == [
        ("https://plain.example/", "5m", None, None, True),
        ("https://news.example/", "5m", None, "news", True),
        ("https://tagged.example/", "5m", None, "shop", True),
    ]


def test_cli_format_option_forces_a_reader(monitor: Monitor, tmp_path: Path) -> None:
    # Auto-detected, this line is CSV, whose first cell (the URL) ends at the comma.
    result = import_file(monitor, tmp_path / "odd.txt", "https://a.example/?q=a,b\n", "--format", "list")
    assert result.out == summary(1, 0, 0)
    assert monitor.watches()[0]["url"] == "https://a.example/?q=a,b"
    result = import_file(monitor, tmp_path / "jobs.txt", "url: https://b.example/\nname: B\n", "--format", "urlwatch")
    assert result.out == summary(1, 0, 0)
    assert watch_fields(monitor.watches()[1]) == ("https://b.example/", "5m", "B", None, True)


def test_cli_refuses_an_unknown_format(monitor: Monitor, tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("https://a.example/\n")
    assert_usage_error(monitor("watch", "import", str(path), "--format", "netscape"),
                       "unknown format 'netscape': one of auto, list, csv, urlwatch, opml, changedetection")


def test_cli_csv_rows_still_refuse_a_masked_password(monitor: Monitor, tmp_path: Path) -> None:
    result = import_file(monitor, tmp_path / "export.csv", "url,interval\nhttps://me:***@a.example/,1h\n")
    assert result.out == summary(0, 0, 1)
    assert result.err == "line 2: refused: its password is masked (export never prints one): add it with the password\n"


# --- progress on long imports ---------------------------------------------------------------------
# Loopback addresses: every row's host is resolved, and a numeric one needs no DNS.
LONG_LIST = "".join(f"http://127.0.0.1/page{n}\n" for n in range(300))


def test_no_progress_counter_when_stderr_is_not_a_terminal(monitor: Monitor, tmp_path: Path) -> None:
    result = import_file(monitor, tmp_path / "long.txt", LONG_LIST)
    assert result.out == summary(300, 0, 0)
    assert result.err == ""


def test_progress_counter_on_a_terminal(monitor: Monitor, tmp_path: Path) -> None:
    """The real CLI as a process whose stderr is a pseudo-terminal."""
    path = tmp_path / "long.txt"
    path.write_text("ftp://refused.example/\n" + LONG_LIST)
    env = {name: value for name, value in os.environ.items() if name not in ENV_VARS}
    env.update(MONITOR_HOME=str(monitor.home), MONITOR_ALLOW_PRIVATE="1")
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "monitor.cli", "watch", "import", str(path)], env=env,
                                   cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal)
        os.close(terminal)
        terminal = -1
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the process has closed the terminal's other end
                break
            if not chunk:
                break
            shown += chunk
        out, _ = process.communicate(timeout=60)
    finally:
        os.close(controller)
        if terminal != -1:
            os.close(terminal)
    assert process.returncode == 0
    assert out == summary(300, 0, 1).encode()
    text = shown.decode()
    assert "\rimporting 1/301 (0%)" in text and "\rimporting 301/301 (100%)" in text
    assert "\rline 1: refused: 'ftp://refused.example/': unsupported scheme 'ftp'" in text
    assert text.endswith("\r" + " " * len("importing 301/301 (100%)") + "\r")  # the counter leaves no trace
    assert len(monitor.watches()) == 300

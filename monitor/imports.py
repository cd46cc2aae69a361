"""The files ``monitor watch import`` reads: one small reader per format, in a registry.

* ``list``: one URL per line (the whole line: a URL with commas in it stays whole);
* ``csv``: ``url,interval,name,tag,enabled`` (header optional), as ``watch export`` writes
  it; a plain list is a one-column CSV file, so ``auto`` reads lists with this reader;
* ``urlwatch``: urlwatch's ``urls.yaml``, one job per YAML document;
* ``opml``: a feed reader's subscription list (``<outline>`` elements, folders as tags);
* ``changedetection``: changedetection.io's ``url-watches.json`` (from its backup zip), or
  the list its Import page takes: a URL per line, then a space and comma-separated tags.

A reader turns the file into :class:`Row` objects. It only maps: whether a URL, an interval
or a name is acceptable is decided where every watch is added (``monitor.cli.watches``). A
file that cannot be read as a whole raises :class:`ImportFileError` before any row exists,
so a refused file adds nothing.
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import re
import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from monitor.durations import MAXIMUM, format_duration


class ImportFileError(Exception):
    """The file as a whole cannot be imported (not UTF-8, not valid YAML/XML/JSON, hostile)."""


@dataclass
class Row:
    """One entry of an import file, mapped to a watch's fields."""

    where: str  # how to find the entry in the file: "line 4", "job 2 'News'"
    url: str = ""
    name: str | None = None
    tag: str | None = None
    interval: str | None = None  # as a user writes it ("10m"); None: the configured default
    enabled: bool = True
    refused: str | None = None  # why the entry cannot become a watch at all
    notes: list[str] = field(default_factory=list)  # what of it has no equivalent here


Reader = Callable[[bytes], list[Row]]
READERS: dict[str, Reader] = {}


def reader(name: str) -> Callable[[Reader], Reader]:
    """Register a reader under the name ``--format`` gives it."""
    def register(function: Reader) -> Reader:
        READERS[name] = function
        return function
    return register


def read(data: bytes, filename: str, fmt: str = "auto") -> list[Row]:
    """The rows of an import file, in the format given or the one :func:`detect` finds."""
    return READERS[detect(filename, data) if fmt == "auto" else fmt](data)


_SUFFIXES = {".csv": "csv", ".yaml": "urlwatch", ".yml": "urlwatch", ".opml": "opml", ".xml": "opml",
             ".json": "changedetection"}
_YAML_LINE = re.compile(r"^(---|\.\.\.)\s*$|^[A-Za-z_]+:(\s|$)")  # "url: ..." (never "https://")
_TAGGED_URL = re.compile(r"^[^\s,]+\s+\S")  # a URL, then a space before any comma: "URL tag1, tag2"


def detect(filename: str, data: bytes) -> str:
    """The format of a file: by its extension when it tells, else by its first character
    and its lines (a plain list is read as CSV of one column)."""
    suffix = Path(filename).suffix.lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    first = _first_byte(data)
    if first == b"<":
        return "opml"
    if first == b"{":
        return "changedetection"
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if any(_YAML_LINE.match(line) for line in lines):
        return "urlwatch"
    if any(_TAGGED_URL.match(line) for line in lines):
        return "changedetection"
    return "csv"


def _first_byte(data: bytes) -> bytes:
    """The first byte after a byte order mark and white space."""
    return data.removeprefix(codecs.BOM_UTF8).lstrip()[:1]


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFileError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _lines(data: bytes) -> list[tuple[int, str]]:
    """``(line number, line)`` of a text file, without blank lines and ``#`` comments."""
    numbered = enumerate((line.strip() for line in _decode(data).splitlines()), start=1)
    return [(number, line) for number, line in numbered if line and not line.startswith("#")]


def _one_tag(tags: list[str], row: Row) -> None:
    """Give ``row`` the first of ``tags``; a watch has one tag, so say which others are lost."""
    if tags:
        row.tag = tags[0]
    if len(tags) > 1:
        row.notes.append(f"only its first tag is kept (a watch has one): {', '.join(map(repr, tags[1:]))} not mapped")


# --- plain lists and CSV --------------------------------------------------------------------
@reader("list")
def read_list(data: bytes) -> list[Row]:
    """One URL per line; blank lines and ``#`` comments skipped."""
    return [Row(f"line {number}", line) for number, line in _lines(data)]


@reader("csv")
def read_csv(data: bytes) -> list[Row]:
    """CSV with the columns url,interval,name,tag,enabled, or a header line naming them in any
    order; a line of one cell is just a URL."""
    cells = csv.reader(io.StringIO(_decode(data)))
    try:
        entries = [(cells.line_num, row) for row in cells
                   if row and row[0].strip() and not row[0].lstrip().startswith("#")]
    except csv.Error as exc:  # a field past the csv module's limit, a NUL byte
        raise ImportFileError(f"not CSV: line {cells.line_num}: {exc}") from None
    keys = ["url", "interval", "name", "tag", "enabled"]
    if entries and entries[0][1][0].strip().lower() == "url":
        keys = [cell.strip().lower() for cell in entries[0][1]]
        entries = entries[1:]
    rows = []
    for line, entry in entries:
        values = dict(zip(keys, (cell.strip() for cell in entry)))
        rows.append(Row(f"line {line}", values.get("url", ""), values.get("name") or None, values.get("tag") or None,
                        values.get("interval") or None,
                        enabled=values.get("enabled", "").lower() not in ("0", "false", "no", "off")))
    return rows


# --- urlwatch ---------------------------------------------------------------------------------
# A YAML alias names a value written once; aliases of aliases stand for exponentially many
# values ("billion laughs"). No real urls.yaml job comes near this many once expanded.
MAX_YAML_VALUES = 100_000
_URLWATCH_MAPPED = {"url", "navigate", "command", "kind", "name", "tags", "enabled", "use_browser"}


@reader("urlwatch")
def read_urlwatch(data: bytes) -> list[Row]:
    """urlwatch's ``urls.yaml``: a job per YAML document, numbered as ``urlwatch --list``
    numbers them. ``url`` (and a browser job's ``navigate``), ``name``, ``tags`` and
    ``enabled`` are mapped; command jobs are refused; any other key is named as not mapped
    (urlwatch has no per-job interval: its jobs run when cron runs it)."""
    return [_urlwatch_row(number, job) for number, job in enumerate(_yaml_documents(_decode(data)), start=1)]


def _yaml_documents(text: str) -> list[Any]:
    """The non-empty documents of a YAML stream, each refused if its aliases expand too far."""
    import yaml  # imported here: only urls.yaml needs it, and it takes 35 ms

    loader = yaml.SafeLoader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if _expanded_size(node) > MAX_YAML_VALUES:
                raise ImportFileError(f"a document's aliases expand to more than {MAX_YAML_VALUES} values "
                                      "(a YAML bomb?): refused")
            document = loader.construct_document(node)
            if document is not None:
                documents.append(document)
    except yaml.MarkedYAMLError as exc:
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark else ""
        raise ImportFileError(f"not valid YAML: {exc.problem or exc.context}{where}") from None
    except yaml.YAMLError as exc:
        raise ImportFileError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ImportFileError("not importable YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return documents


def _expanded_size(root: Any) -> int:
    """How many values the YAML node ``root`` stands for once its aliases are expanded,
    counted without expanding them (an alias is the same node object again), and capped
    just above :data:`MAX_YAML_VALUES`."""
    from yaml import MappingNode, SequenceNode

    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        known = sizes.get(id(node))
        if known == -1:
            raise ImportFileError("a YAML alias refers to itself (a recursive document): refused")
        if known is not None:
            return known
        sizes[id(node)] = -1
        if isinstance(node, SequenceNode):
            children = node.value
        elif isinstance(node, MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        total = min(1 + sum(size(child) for child in children), MAX_YAML_VALUES + 1)
        sizes[id(node)] = total
        return total

    return size(root)


def _scalar_text(value: Any) -> str | None:
    """A YAML or JSON value as text when it is a string or a number, else None."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _urlwatch_row(number: int, job: Any) -> Row:
    name = _scalar_text(job.get("name")) if isinstance(job, dict) else None
    row = Row(f"job {number}" + (f" {name!r}" if name else ""), name=name)
    if not isinstance(job, dict):
        row.refused = "not a urlwatch job (a mapping with url, navigate or command)"
    elif "command" in job or job.get("kind") == "shell":
        row.refused = "command jobs cannot be watched: this monitor fetches web pages and runs no commands"
    elif not isinstance(job.get("url", job.get("navigate")), str):
        row.refused = "it has no url" if "url" not in job and "navigate" not in job else "its url is not text"
    else:
        row.url = job.get("url", job.get("navigate"))
        row.enabled = job.get("enabled") is not False
        tags = job.get("tags")
        _one_tag([text for text in map(_scalar_text, tags if isinstance(tags, list) else [tags]) if text], row)
        if "navigate" in job or job.get("kind") == "browser" or job.get("use_browser") is True:
            row.notes.append("it is fetched without a browser: links that only its scripts add are not seen")
        unmapped = [str(key) for key in job if key not in _URLWATCH_MAPPED]
        if unmapped:
            row.notes.append(f"not mapped: {', '.join(unmapped)}")
    return row


# --- OPML -------------------------------------------------------------------------------------
@reader("opml")
def read_opml(data: bytes) -> list[Row]:
    """A feed reader's OPML export: every ``<outline>`` with an ``htmlUrl`` (the site's
    homepage) or else an ``xmlUrl`` (the feed) is a watch named by its ``title`` or ``text``
    and tagged with the title of the outline around it (its folder). A DOCTYPE is refused:
    OPML needs none, and the entities a DTD declares can expand without bound."""
    parser = xml.parsers.expat.ParserCreate()
    rows: list[Row] = []
    labels: list[str | None] = []  # the title of each <outline> the parser is inside
    in_root = False

    def doctype(name: str, *_: Any) -> None:
        if name.lower() != "opml":  # e.g. a browser's bookmarks, <!DOCTYPE NETSCAPE-Bookmark-file-1>
            raise ImportFileError(f"not OPML: its DOCTYPE is {name}")
        raise ImportFileError(f"it has a DOCTYPE ({name}): OPML needs none, and a DTD's entities "
                              "can expand without bound: refused")

    def start(element: str, attributes: dict[str, str]) -> None:
        nonlocal in_root
        if not in_root:
            in_root = True
            if element.lower() != "opml":
                raise ImportFileError(f"not OPML: its root element is <{element}>, not <opml>")
        if element != "outline":
            return
        attributes = {key.lower(): value.strip() for key, value in attributes.items()}
        label = attributes.get("title") or attributes.get("text") or None
        url = attributes.get("htmlurl") or attributes.get("xmlurl")
        if url:
            row = Row(f"line {parser.CurrentLineNumber}", url, label, next((t for t in reversed(labels) if t), None))
            if not attributes.get("htmlurl"):
                row.notes.append("it has no htmlUrl, so its feed is watched: checks fail unless that address "
                                 "serves an HTML page")
            rows.append(row)
        labels.append(label)

    def end(element: str) -> None:
        if element == "outline":
            labels.pop()

    parser.StartDoctypeDeclHandler = doctype
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as exc:
        raise ImportFileError(f"not well-formed XML: {exc}") from None
    return rows


# --- changedetection.io ---------------------------------------------------------------------
_SECONDS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
# Watch settings that change what changedetection.io compares or how it fetches: named
# when set, since nothing here does the same.
_CHANGEDETECTION_UNMAPPED = ("include_filters", "subtractive_selectors", "ignore_text", "trigger_text",
                             "text_should_not_be_present", "extract_text", "browser_steps", "headers", "body",
                             "notification_urls", "proxy")


@reader("changedetection")
def read_changedetection(data: bytes) -> list[Row]:
    """changedetection.io's ``url-watches.json`` when the file is a JSON object, else the
    list its Import page takes (``https://example.org/ tag1, tag2``)."""
    if _first_byte(data) == b"{":
        return _changedetection_json(data)
    rows = []
    for number, line in _lines(data):
        url, _, tags = line.partition(" ")
        row = Row(f"line {number}", url)
        _one_tag([tag.strip() for tag in tags.split(",") if tag.strip()], row)
        rows.append(row)
    return rows


def _changedetection_json(data: bytes) -> list[Row]:
    """Watches keyed by uuid under ``watching``: ``url``, ``title``, ``tags`` (uuids of the
    tags in ``settings.application.tags``; older exports have a ``tag`` text), ``paused`` and
    ``time_between_check``; a watch on the default interval gets the export's default
    (``settings.requests.time_between_check``)."""
    try:
        export = json.loads(_decode(data))
    except ValueError as exc:
        raise ImportFileError(f"not valid JSON: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ImportFileError("not importable JSON: nested too deeply") from None
    watching = export.get("watching") if isinstance(export, dict) else None
    if not isinstance(watching, dict):
        raise ImportFileError("no \"watching\" object: not a changedetection.io url-watches.json")
    settings = export.get("settings") if isinstance(export.get("settings"), dict) else {}
    tag_titles = {uuid: _scalar_text(tag.get("title")) for uuid, tag in
                  _dict(_dict(settings.get("application")).get("tags")).items() if isinstance(tag, dict)}
    default_interval, _ = _interval(_dict(settings.get("requests")).get("time_between_check"))
    return [_changedetection_row(uuid, watch, tag_titles, default_interval) for uuid, watch in watching.items()]


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _interval(value: Any) -> tuple[str | None, bool]:
    """A ``time_between_check`` object as an interval (None when it sets none) and whether
    it made sense (every part a whole number or null)."""
    if not isinstance(value, dict):
        return None, value is None
    seconds = 0
    for unit, size in _SECONDS.items():
        part = value.get(unit)
        if isinstance(part, str) and re.fullmatch(r"[0-9]{1,12}", part.strip()):
            part = int(part)
        if part is not None and (not isinstance(part, int) or isinstance(part, bool) or part < 0):
            return None, False
        # Capped just past the longest interval: the check of the row refuses it by name.
        seconds = min(seconds + (part or 0) * size, MAXIMUM + 1)
    return (format_duration(seconds) if seconds else None), True


def _changedetection_row(uuid: str, watch: Any, tag_titles: dict[str, str | None], default: str | None) -> Row:
    watch = _dict(watch)
    title = _scalar_text(watch.get("title"))
    row = Row(f"watch {uuid}" + (f" {title!r}" if title else ""), name=title)
    if not isinstance(watch.get("url"), str):
        row.refused = "it has no url" if watch.get("url") is None else "its url is not text"
        return row
    row.url = watch["url"]
    row.enabled = watch.get("paused") is not True
    tags: list[str] = []
    for uuid_of_tag in watch.get("tags") if isinstance(watch.get("tags"), list) else []:
        if isinstance(uuid_of_tag, str) and tag_titles.get(uuid_of_tag):
            tags.append(tag_titles[uuid_of_tag])
        else:
            row.notes.append(f"tag {uuid_of_tag!r} is not among the export's tags: not mapped")
    if not tags and isinstance(watch.get("tag"), str):  # exports before tags had uuids
        tags = [tag.strip() for tag in watch["tag"].split(",") if tag.strip()]
    _one_tag(tags, row)
    interval, understood = _interval(watch.get("time_between_check"))
    row.interval = default if watch.get("time_between_check_use_default") is True or interval is None else interval
    if not understood:
        row.notes.append("time_between_check not understood: the default interval is used")
    unmapped = [key for key in _CHANGEDETECTION_UNMAPPED if watch.get(key)]
    if _dict(watch.get("time_schedule_limit")).get("enabled"):
        unmapped.append("time_schedule_limit")
    if watch.get("method") not in (None, "GET"):
        unmapped.append(f"method {watch['method']!r}")
    if watch.get("fetch_backend") == "html_webdriver":
        unmapped.append("fetch_backend (a browser)")
    if watch.get("processor") not in (None, "text_json_diff"):
        unmapped.append(f"processor {watch['processor']!r}")
    if unmapped:
        row.notes.append(f"not mapped: {', '.join(unmapped)}")
    return row

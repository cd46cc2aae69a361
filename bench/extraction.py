"""Benchmark link extraction over the shared corpus of saved web pages.

Runs ``decode_html`` -> ``parse`` (html5lib) -> ``links_in`` (breadth-first walk) over every
``*.html`` page of the corpus, ``--repeat`` times, and prints throughput and the split of the
time between the three stages. Figures only: nothing is asserted.

    .venv/bin/python bench/extraction.py [--repeat 3] [--corpus DIR] [--limit N]
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monitor.extract import decode_html, links_in, parse  # noqa: E402

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


@dataclass
class Totals:
    pages: int = 0
    bytes: int = 0
    links: int = 0
    stages: dict[str, float] = field(default_factory=lambda: {"decode": 0.0, "parse": 0.0, "walk": 0.0})

    @property
    def seconds(self) -> float:
        return sum(self.stages.values())


def page_url(path: Path) -> str:
    """The URL the page is treated as fetched from (its host derived from the file name)."""
    host = re.sub(r"[^a-z0-9.-]+", "-", path.stem.lower()).strip("-.")
    return f"https://{host}/page"


def extract_timed(body: bytes, url: str, limit: int | None, totals: Totals) -> None:
    """Extract one page, adding each stage's time to ``totals``."""
    clock = time.perf_counter
    start = clock()
    text = decode_html(body)
    decoded = clock()
    soup = parse(text)
    parsed = clock()
    found = links_in(soup, url, limit)
    walked = clock()
    totals.stages["decode"] += decoded - start
    totals.stages["parse"] += parsed - decoded
    totals.stages["walk"] += walked - parsed
    totals.pages += 1
    totals.bytes += len(body)
    totals.links += len(found)


def report(totals: Totals, repeat: int, page_count: int) -> None:
    seconds = totals.seconds
    megabytes = totals.bytes / 1e6
    print(f"pages     {page_count} x {repeat} runs = {totals.pages}")
    print(f"input     {megabytes:.1f} MB")
    print(f"time      {seconds:.2f} s")
    print(f"speed     {megabytes / seconds:.2f} MB/s   {totals.pages / seconds:.1f} pages/s   {totals.links / seconds:,.0f} links/s")
    print(f"links     {totals.links / totals.pages:.1f} per page")
    for stage, spent in totals.stages.items():
        print(f"  {stage:<7} {spent:7.2f} s  {100 * spent / seconds:5.1f} %  {1000 * spent / totals.pages:7.2f} ms/page")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", "-n", type=int, default=3, help="passes over the corpus (default 3)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help=f"directory of *.html pages (default {DEFAULT_CORPUS})")
    parser.add_argument("--limit", type=int, default=None, help="max links per page, as max_links_per_page (default none)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    pages = [(path, path.read_bytes()) for path in sorted(args.corpus.glob("*.html"))]
    if not pages:
        print(f"no *.html pages in {args.corpus}", file=sys.stderr)
        return 1
    totals = Totals()
    for _ in range(args.repeat):
        for path, body in pages:
            extract_timed(body, page_url(path), args.limit, totals)
    report(totals, args.repeat, len(pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark link extraction over the shared corpus of saved web pages, per parse engine.

Runs ``decode_html`` then each engine (parse + breadth-first walk + URL resolution) over
every ``*.html`` page of the corpus, ``--repeat`` times, and prints CPU throughput (MB/s
of one core: ``time.process_time``), the decode/extract split and the ratio between the
engines. Figures only: nothing is asserted.

    .venv/bin/python bench/extraction.py [--repeat 3] [--corpus DIR] [--engines lexbor,html5lib]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monitor.parsing import ENGINES, decode_html  # noqa: E402
from tests.test_corpus import page_url  # noqa: E402

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def one_pass(engine: str, pages: list[tuple[Path, bytes]]) -> tuple[float, float, int]:
    """CPU seconds spent decoding and extracting, and the links found, over all pages."""
    clock = time.process_time
    decoding = extracting = 0.0
    links = 0
    for path, body in pages:
        start = clock()
        html = decode_html(body)
        decoded = clock()
        links += len(ENGINES[engine](html, page_url(path), None))
        extracting += clock() - decoded
        decoding += decoded - start
    return decoding, extracting, links


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", "-n", type=int, default=3, help="passes over the corpus (default 3)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help=f"directory of *.html pages (default {DEFAULT_CORPUS})")
    parser.add_argument("--engines", default="lexbor,html5lib", help="comma-separated engines to measure")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    engines = args.engines.split(",")
    unknown = set(engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engine(s): {', '.join(sorted(unknown))} (known: {', '.join(ENGINES)})")

    pages = [(path, path.read_bytes()) for path in sorted(args.corpus.glob("*.html"))]
    if not pages:
        print(f"no *.html pages in {args.corpus}", file=sys.stderr)
        return 1
    megabytes = sum(len(body) for _, body in pages) / 1e6
    print(f"corpus: {len(pages)} pages, {megabytes:.1f} MB; median of {args.repeat} passes, CPU time of one core")
    speeds = {}
    for engine in engines:
        passes = [one_pass(engine, pages) for _ in range(args.repeat)]
        decoding, extracting, links = min(passes, key=lambda run: abs(sum(run[:2]) - statistics.median(
            sum(other[:2]) for other in passes)))
        speeds[engine] = megabytes / (decoding + extracting)
        print(f"{engine:<9} {speeds[engine]:7.1f} MB/s  {len(pages) / (decoding + extracting):7.1f} pages/s  "
              f"{links / (decoding + extracting):9,.0f} links/s  (decode {1000 * decoding / len(pages):.2f} ms/page, "
              f"parse+walk {1000 * extracting / len(pages):.2f} ms/page, {links} links)")
    if len(speeds) == 2:
        fast, slow = sorted(speeds, key=speeds.get, reverse=True)
        print(f"{fast} is {speeds[fast] / speeds[slow]:.1f}x {slow}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

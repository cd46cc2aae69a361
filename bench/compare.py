"""This project against urlwatch 2.29, side by side, on the same pages, in the same run.

A local origin (:mod:`bench.origin`) serves ``--pages`` real homepages, each on its own
loopback address. Both tools first take a baseline of every page (not timed). Then, per run
and scenario, the pages change, urlwatch checks every page once (wall time of one
``urlwatch`` run, its 10 threads), then this project's full stack does (``monitor up``:
RabbitMQ, supervisord, every process, default configuration but ``politeness_delay = 0``:
the pages stand for different sites): from ``monitor watch recheck --all`` until every
watch has a new result. Scenarios:

* ``recheck``: 10 % of the pages gain 3 links;
* ``cold``: every page gains 3 links;
* ``wan``: as ``recheck``, with every response delayed uniformly 0.2-1.0 s by the origin.

"new links exact" means the alerts of the round are exactly the links added (ours) and the
links urlwatch's report adds are as many as were added (urlwatch). Prints every run, then
the medians and ratios, then the peak RSS of every supervised program. Figures only.

    .venv/bin/python bench/compare.py --pages 1000 --runs 3
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Stack, peak_rss  # noqa: E402
from bench.origin import Origin  # noqa: E402
from bench.peer import Urlwatch  # noqa: E402

SCENARIOS = {"recheck": (0.1, None), "cold": (1.0, None), "wan": (0.1, (0.2, 1.0))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--workers", type=int, default=2, help="worker processes of our stack")
    parser.add_argument("--validators", action="store_true", help="the origin sends ETag/Last-Modified and 304s")
    args = parser.parse_args()
    scenarios = args.scenarios.split(",")

    origin = Origin(args.pages, validators=args.validators).start()
    rng = random.Random(7)
    print(f"{args.pages} pages ({statistics.median(len(p.body) for p in origin.pages) / 1000:.0f} KB median), "
          f"validators {'on' if args.validators else 'off'}, {os.cpu_count()} cores")
    urlwatch = Urlwatch([origin.url(i) for i in range(args.pages)])
    stack = Stack([origin.url(i) for i in range(args.pages)], args.workers, {"politeness_delay": 0.0})
    results: dict[str, list[tuple[float, float, bool, bool]]] = {name: [] for name in scenarios}
    generation = 0
    try:
        seconds, _ = urlwatch.run()
        print(f"baselines: urlwatch {seconds:.1f}s; ours {stack.round()[0]:.1f}s (first checks, not compared)")
        for run in range(1, args.runs + 1):
            for name in scenarios:
                share, delay = SCENARIOS[name]
                generation += 1
                changed = rng.sample(range(args.pages), max(1, round(share * args.pages)))
                added = sorted(url for page in changed for url in origin.mutate(page, 3, generation))
                origin.delay = delay
                theirs, theirs_added = urlwatch.run()
                ours, alerted = stack.round()
                origin.delay = None
                exact = (sorted(alerted) == added, theirs_added == len(added))
                results[name].append((args.pages / ours, args.pages / theirs, *exact))
                print(f"run {run} {name:<8} ours {ours:6.2f}s = {args.pages / ours:7.1f} pages/s   "
                      f"urlwatch {theirs:6.2f}s = {args.pages / theirs:6.1f} pages/s   ratio {theirs / ours:5.1f}x   "
                      f"new links: {len(added)} added, ours {len(alerted)} alerted ({'exact' if exact[0] else 'NOT exact'}),"
                      f" urlwatch {theirs_added} reported ({'exact' if exact[1] else 'NOT exact'})")
        print(f"\nmedians of {args.runs} run(s), {args.pages} pages, our stack with {args.workers} workers:")
        print("| scenario | ours pages/s | urlwatch pages/s | ratio | new links exact (ours / urlwatch) |")
        print("|---|---|---|---|---|")
        for name, rows in results.items():
            ours = statistics.median(row[0] for row in rows)
            theirs = statistics.median(row[1] for row in rows)
            print(f"| {name} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.1f}x | "
                  f"{'yes' if all(row[2] for row in rows) else 'NO'} / {'yes' if all(row[3] for row in rows) else 'NO'} |")
        print(f"\norigin: {origin.requests} requests, {origin.not_modified} answered 304")
        print("peak RSS per process: " + ", ".join(f"{name} {mb:.0f} MB" for name, mb in peak_rss(stack.home)))
        print("\n" + stack.status())
    finally:
        stack.close()
        origin.stop()


if __name__ == "__main__":
    main()

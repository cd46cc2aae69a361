"""urlwatch 2.29, the tool people use today, run on the same pages for comparison.

It is installed by this module into a throwaway virtualenv (``var/bench/urlwatch-2.29``,
kept between runs so a run does not re-download it: delete the directory to start
over). Each :class:`Urlwatch` has its own job list, configuration, hooks and cache in a
temporary directory, so nothing under ``~`` is read or written. Jobs are one per page with
the ``css:a`` filter (every link element), reported as a plain-text diff on stdout;
urlwatch checks 10 jobs at once (its fixed thread pool).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERSION = "2.29"
VENV = Path(__file__).resolve().parents[1] / "var" / "bench" / f"urlwatch-{VERSION}"
CONFIG = """\
display: {new: false, error: true, unchanged: false, empty-diff: false}
report:
  text: {line_length: 1000, details: true, footer: false, minimal: false, separate: false}
  stdout: {enabled: true, color: false}
"""


def install() -> Path:
    """The urlwatch executable, installing it into the throwaway virtualenv first if needed."""
    executable = VENV / "bin" / "urlwatch"
    if not executable.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", f"urlwatch=={VERSION}"], check=True)
    return executable


class Urlwatch:
    def __init__(self, urls: list[str]) -> None:
        self.executable = install()
        self.directory = Path(tempfile.mkdtemp(prefix="bench-urlwatch-"))
        jobs = "---\n".join(f'name: "page {n}"\nurl: "{url}"\nfilter: "css:a"\n' for n, url in enumerate(urls))
        (self.directory / "urls.yaml").write_text(jobs)
        (self.directory / "urlwatch.yaml").write_text(CONFIG)
        (self.directory / "hooks.py").write_text("")

    def run(self, timeout: float = 1800) -> tuple[float, int]:
        """Check every job once; return the wall time and the number of links its report adds."""
        started = time.monotonic()
        result = subprocess.run([str(self.executable), "--urls", "urls.yaml", "--config", "urlwatch.yaml",
                                 "--hooks", "hooks.py", "--cache", "cache.db"], cwd=self.directory,
                                capture_output=True, text=True, timeout=timeout)
        seconds = time.monotonic() - started
        if result.returncode != 0:
            raise SystemExit(f"urlwatch failed ({result.returncode}): {result.stderr.strip()[-500:]}")
        added = sum(1 for line in result.stdout.splitlines() if line.startswith("+<a"))
        return seconds, added

"""A watch's recent checks on the dashboard, as the real pipeline makes them."""
from __future__ import annotations

import re
import urllib.request

from tests.helpers import wait_for
from tests.integration.test_pipeline import INITIAL, _wait_checks_now


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def test_a_watchs_page_shows_its_recent_checks_and_the_list_a_sparkline(pipeline, site):
    url = site.add_page("/", INITIAL)
    watch_id = pipeline.store.add_watch(url, 3600).id
    pipeline.processor()
    pipeline.worker()
    pipeline.web()
    _wait_checks_now(pipeline, watch_id)                    # the baseline: 3 links found, none alerted
    site.publish("/", "/scoop", "A scoop")
    _wait_checks_now(pipeline, watch_id)                    # 4 found, 1 new, 1 alerted
    del site.pages["/"]
    _wait_checks_now(pipeline, watch_id)                    # an error
    wait_for(lambda: len(pipeline.store.recent_checks(watch_id)) == 3, timeout=10, message="three checks kept")

    html = _page(f"{pipeline.web_url}watches/{watch_id}")
    checks = html.split('id="checks"')[1].split("</table>")[0]
    rows = [row for row in re.findall(r"<tr>(.*?)</tr>", checks, re.S) if "<td" in row]
    assert len(rows) == 3
    cells = [re.findall(r'data-label="(?:Links found|New|Alerted)">([^<]*)<', row) for row in rows]
    assert cells == [["", "0", "0"], ["4", "1", "1"], ["3", "3", "0"]], \
        "newest first: the error, the scoop, the baseline (its links new to the index, none alerted)"
    assert "error" in rows[0] and "404" in rows[0]
    parse = [re.findall(r'data-label="Parse">([^<]*)<', row)[0] for row in rows]
    assert parse[0] == "" and all(re.fullmatch(r"\d+\.\d ms", shown) for shown in parse[1:]), parse

    listing = _page(f"{pipeline.web_url}watches")
    assert listing.count("<rect") == 3 and 'class="per-day">1<' in listing

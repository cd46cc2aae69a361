"""The home's key: job tokens only its holder can make, and a stable public home id."""
from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor

from monitor.homekey import KEY_FILE, HomeKey


def test_a_token_verifies_for_its_watch_only(tmp_path):
    key = HomeKey.load(tmp_path)
    token = key.token(7, 1_700_000_000.25)
    assert key.verify(7, token)
    assert not key.verify(8, token), "a token names one watch"
    assert not key.verify(7, None) and not key.verify(7, "") and not key.verify(7, "garbage")
    issued, mac = token.split(".")
    assert not key.verify(7, f"{int(issued) + 1}.{mac}"), "the issue time is signed too"
    assert not key.verify(7, "\u0663." + mac), "only ASCII digits are a time"


def test_another_home_cannot_make_or_check_this_homes_tokens(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ours, theirs = HomeKey.load(tmp_path / "a"), HomeKey.load(tmp_path / "b")
    assert not ours.verify(1, theirs.token(1, 5.0))
    assert ours.home_id != theirs.home_id


def test_the_key_is_private_stable_and_made_once_under_a_race(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(lambda _: HomeKey.load(tmp_path), range(8)))
    assert len({key.home_id for key in keys}) == 1, "processes starting together agree on one key"
    assert stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode) == 0o600
    assert HomeKey.load(tmp_path).verify(3, keys[0].token(3, 1.0)), "the key survives a restart"
    assert keys[0].home_id not in (tmp_path / KEY_FILE).read_text(), "the public id does not reveal the key"

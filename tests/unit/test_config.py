"""Configuration: defaults, TOML file, environment, in that order of precedence."""
from __future__ import annotations

from pathlib import Path

import pytest

from monitor import broker
from monitor.config import Config, ConfigError, load


def test_defaults_need_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load({})
    assert config.home == tmp_path / "var"
    assert config.local_broker and config.workers == 2 and not config.allow_private
    assert config.broker_url.startswith("amqp://guest:guest@127.0.0.1:")


def test_toml_overrides_defaults_and_environment_overrides_toml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "monitor.toml").write_text('workers = 5\nallow_private = true\nfetch_max_bytes = 1000\nhome = "data"\n')
    config = load({})
    assert (config.workers, config.allow_private, config.fetch_max_bytes, config.home) == (5, True, 1000, tmp_path / "data")
    config = load({"MONITOR_WORKERS": "3", "MONITOR_ALLOW_PRIVATE": "0", "MONITOR_HOME": str(tmp_path / "h"),
                   "AMQP_URL": "amqp://u:p@broker:5672/%2F"})
    assert (config.workers, config.allow_private, config.home) == (3, False, tmp_path / "h")
    assert not config.local_broker and config.broker_url == "amqp://u:p@broker:5672/%2F"


def test_monitor_config_points_at_another_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "elsewhere.toml"
    other.write_text("job_timeout = 42\n")
    assert load({"MONITOR_CONFIG": str(other)}).job_timeout == 42
    with pytest.raises(ConfigError, match="no such file"):
        load({"MONITOR_CONFIG": str(tmp_path / "missing.toml")})


@pytest.mark.parametrize("content, message", [
    ("workers = 'many'\n", "not a valid int"),
    ("no_such_setting = 1\n", "unknown setting 'no_such_setting'"),
    ("workers = \n", "monitor.toml"),
    ("allow_private = 'perhaps'\n", "not a valid bool"),
])
def test_bad_files_are_explained(tmp_path, monkeypatch, content, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "monitor.toml").write_text(content)
    with pytest.raises(ConfigError, match=message):
        load({})


def test_bad_environment_values_are_explained(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="MONITOR_WORKERS: 'two' is not a valid int"):
        load({"MONITOR_WORKERS": "two"})


def test_two_homes_never_share_ports_sockets_or_node_names():
    # Fixed paths: derived ports are a hash, so the pair is checked once and for all.
    one, two = Config(home=Path("/srv/monitor/one")), Config(home=Path("/srv/monitor/two"))
    assert one.supervisor_socket != two.supervisor_socket
    assert broker.node_name(one) != broker.node_name(two)
    ports = lambda c: {c.local_amqp_port, broker.epmd_port(c), broker.dist_port(c)}  # noqa: E731
    assert len(ports(one)) == 3 and not ports(one) & ports(two)
    assert Config(home=Path("/srv/monitor/one")).local_amqp_port == one.local_amqp_port, "stable for a home"

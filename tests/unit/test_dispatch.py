"""A worker runs many jobs at once but never two for the same host (``workers.dispatch``)."""
from __future__ import annotations

from workers.dispatch import HostQueues


def test_jobs_for_a_busy_host_wait_in_arrival_order_and_other_hosts_start_at_once():
    hosts: HostQueues[str] = HostQueues()
    assert hosts.admit("a.example", "a1") is True
    assert hosts.admit("b.example", "b1") is True, "another host starts at once"
    assert hosts.admit("a.example", "a2") is False
    assert hosts.admit("a.example", "a3") is False
    assert hosts.waiting() == 2
    assert hosts.done("a.example") == "a2"
    assert hosts.done("a.example") == "a3"
    assert hosts.done("a.example") is None
    assert hosts.admit("a.example", "a4") is True, "an idle host starts at once again"
    assert hosts.done("b.example") is None and hosts.waiting() == 0

"""``/metrics`` for Prometheus and ``/healthz`` for whoever watches the watcher.

Both are computed when asked, from what lasts: the store's tables (checks counted per minute
and outcome, alerts, deliveries, exits, workers, the watch list), the broker's queue depths and
supervisord's view of the programs, gathered by :func:`monitor.cli.operations.gather_status`
as for ``monitor status``. The pipeline's processes keep no counters of their own, so a
restart of any of them (or of this one) changes no value.

The fetch and parse time histograms are counted by the store as the processor records each
check (``timings``, in the buckets of :data:`monitor.store.TIMING_BUCKETS_S`).
"""
from __future__ import annotations

import os
from typing import Callable, Iterator

from flask import Blueprint, Response, current_app, g, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString
from prometheus_client.registry import Collector

from monitor import amqp
from monitor.cli.operations import Status, gather_status, process_name
from monitor.config import Config
from monitor.store import OUTCOMES, Store
from monitor.web import app as web_app

blueprint = Blueprint("metrics", __name__)

# A due watch is stuck once it waited this long past its due time, or its own interval when
# that is longer: one missed round is a busy fleet, a whole extra interval is not.
HEALTH_MARGIN_S = 60.0
QUEUES = (amqp.JOB_QUEUE, amqp.TASK_QUEUE, amqp.DEAD_LETTER)
REGISTRY_KEY = "monitor.metrics"  # where the app keeps its registry (app.extensions)


class PipelineCollector(Collector):
    """Every figure of ``/metrics``, read afresh at each scrape."""

    def __init__(self, config: Config, store: Callable[[], Store]) -> None:
        self.config = config
        self.store = store  # the request's store (monitor.web.app.store): a scrape is a request

    def collect(self) -> Iterator[Metric]:
        store = self.store()
        status = gather_status(self.config, store)
        yield from self._checks(store)
        yield from self._watches(status)
        yield from self._alerts(store)
        yield from self._queues(status)
        yield from self._fleet(store, status)
        yield from self._processes(status)

    def _checks(self, store: Store) -> Iterator[Metric]:
        totals = store.check_totals()
        checks = CounterMetricFamily("monitor_checks", "Checks recorded by the processor, by outcome "
                                     "(not_modified_http: HTTP 304; not_modified_hash: same body).", labels=["outcome"])
        for outcome in OUTCOMES:  # every outcome, zero included: rate() needs the series before it moves
            checks.add_metric([outcome], totals.get(outcome, 0))
        yield checks
        for kind, help_text in (("fetch", "Time to download a page (each check that fetched one)."),
                                ("parse", "Time to extract a page's links (each check that parsed one).")):
            buckets, seconds = store.timing_histogram(kind)
            yield HistogramMetricFamily(f"monitor_{kind}_seconds", help_text, sum_value=seconds,
                                        buckets=[(floatToGoString(bound), count) for bound, count in buckets])

    @staticmethod
    def _watches(status: Status) -> Iterator[Metric]:
        summary = status.summary
        for name, key, help_text in (
                ("monitor_watches", "watches", "Watches on the list."),
                ("monitor_watches_enabled", "enabled", "Watches not paused."),
                ("monitor_watches_failing", "failing", "Watches whose latest check failed."),
                ("monitor_watches_due", "due", "Enabled watches due and not in flight."),
                ("monitor_watches_in_flight", "in_flight", "Watches whose job is being checked.")):
            yield GaugeMetricFamily(name, help_text, value=summary[key])
        yield GaugeMetricFamily("monitor_schedule_lag_seconds", "How long the most overdue enabled watch has been due.",
                                value=status.lag["behind_s"])
        yield GaugeMetricFamily("monitor_watches_overdue_by_an_interval",
                                "Enabled watches due for longer than their own interval.",
                                value=status.lag["overdue_by_an_interval"])

    @staticmethod
    def _alerts(store: Store) -> Iterator[Metric]:
        # The newest alert's rowid counts every alert ever recorded: rows are numbered in
        # order and not renumbered, where COUNT(*) would go down when a watch is removed
        # (its alerts go with it).
        yield CounterMetricFamily("monitor_alerts", "Alerts recorded (new links, and notices about a page).",
                                  value=store.last_alert_rowid())
        deliveries = GaugeMetricFamily("monitor_alert_deliveries", "Alert deliveries per sink and state "
                                       "(failed: given up on, see `monitor alerts failed`).", labels=["sink", "state"])
        for sink in store.list_sinks():
            for state in ("delivered", "pending", "failed"):
                deliveries.add_metric([sink.name, state], getattr(sink, state))
        yield deliveries

    @staticmethod
    def _queues(status: Status) -> Iterator[Metric]:
        yield GaugeMetricFamily("monitor_broker_up", "1 when the broker answered this scrape.",
                                value=0 if status.queue_error else 1)
        if status.queue_error:
            return  # no depths rather than zeros: an alert on a full queue must not clear because the broker is away
        ready = GaugeMetricFamily("monitor_queue_messages_ready", "Messages waiting in a queue.", labels=["queue"])
        unacked = GaugeMetricFamily("monitor_queue_messages_unacked", "Messages delivered and not acknowledged yet "
                                    "(known for the local node only).", labels=["queue"])
        for queue in QUEUES:
            if queue in status.queues:  # (not declared until the pipeline first connects)
                waiting, delivered = status.queues[queue]
                ready.add_metric([queue], waiting)
                if delivered is not None:
                    unacked.add_metric([queue], delivered)
        yield ready
        yield unacked

    @staticmethod
    def _fleet(store: Store, status: Status) -> Iterator[Metric]:
        workers = GaugeMetricFamily("monitor_workers", "Workers by state (lost: no heartbeat).", labels=["state"])
        for state, count in status.fleet.items():
            workers.add_metric([state], count)
        yield workers
        # Per exit (by id: a proxy's URL may hold credentials); a removed exit's series ends.
        requests = CounterMetricFamily("monitor_exit_requests", "Requests through a proxy exit.", labels=["proxy"])
        refusals = CounterMetricFamily("monitor_exit_refusals", "Requests a host refused through a proxy exit "
                                       "(403, 429, proxy and connection errors).", labels=["proxy"])
        for proxy in store.list_proxies():
            requests.add_metric([str(proxy.id)], proxy.requests)
            refusals.add_metric([str(proxy.id)], proxy.refusals)
        yield requests
        yield refusals
        yield GaugeMetricFamily("monitor_hosts_disabled", "Hosts on the disable list (in cooldown).",
                                value=len(status.cooldowns))

    @staticmethod
    def _processes(status: Status) -> Iterator[Metric]:
        yield GaugeMetricFamily("monitor_supervisord_up", "1 when supervisord answered this scrape.",
                                value=0 if status.process_error else 1)
        running = GaugeMetricFamily("monitor_process_running", "1 when a supervised program is RUNNING.",
                                    labels=["process", "state"])
        for info in status.processes:
            running.add_metric([process_name(info), info["statename"]], 1 if info["statename"] == "RUNNING" else 0)
        yield running


@blueprint.record_once
def _registry(state) -> None:
    """A registry of the app's own (not prometheus_client's global one): two apps in one
    process, as in tests, do not share collectors."""
    registry = CollectorRegistry(auto_describe=False)  # no collect() at registration: no request yet
    registry.register(PipelineCollector(state.app.config["MONITOR"], web_app.store))
    state.app.extensions[REGISTRY_KEY] = registry


@blueprint.get("/metrics")
def metrics() -> Response:
    return Response(generate_latest(current_app.extensions[REGISTRY_KEY]), content_type=CONTENT_TYPE_LATEST)


# --- health ----------------------------------------------------------------------------------
def health_reasons(status: Status, overdue: tuple[int, tuple[int, float, int] | None],
                   supervised: bool = False) -> list[str]:
    """Why the pipeline is stuck (nothing: healthy): the broker away, a supervised program
    down, watches overdue (``overdue`` as :meth:`Store.overdue_watches` gives it); when this
    process runs under supervisord (``supervised``), supervisord not answering."""
    reasons = []
    if status.queue_error:
        reasons.append(f"the broker cannot be reached: {status.queue_error}")
    if supervised and status.process_error:
        reasons.append(f"supervisord cannot be asked about the programs: {status.process_error}")
    for info in status.processes:
        # A program that never started is one this configuration does not run (the local
        # broker's when AMQP_URL names another): STOPPED with no start time.
        never_started = info["statename"] == "STOPPED" and not info.get("start")
        if info["statename"] != "RUNNING" and not never_started:
            reasons.append(f"process {process_name(info)} is {info['statename']}")
    count, worst = overdue
    if worst is not None:
        watch_id, behind, interval = worst
        reasons.append(f"{count} watch(es) overdue by more than max({HEALTH_MARGIN_S:g} s, their interval): "
                       f"watch {watch_id} was due {behind:.0f} s ago (interval {interval} s)")
    return reasons


@blueprint.get("/healthz")
def healthz() -> Response:
    """200 ``{"status": "ok"}`` when the pipeline is moving, 503 ``{"status": "stuck",
    "reasons": [...]}`` when it is not."""
    store = web_app.store()
    status = gather_status(g.config, store)
    overdue = store.overdue_watches(status.now, HEALTH_MARGIN_S)
    # (supervisord sets SUPERVISOR_ENABLED in its programs' environment.)
    reasons = health_reasons(status, overdue, supervised="SUPERVISOR_ENABLED" in os.environ)
    response = jsonify(
        status="stuck" if reasons else "ok", reasons=reasons,
        broker="unreachable" if status.queue_error else "up",
        # Outside supervisord (a web front run by hand, or by tests) there is no one to ask.
        processes=(f"not judged: {status.process_error}" if status.process_error
                   else {process_name(p): p["statename"] for p in status.processes}),
        overdue_watches=overdue[0], schedule_lag_s=round(status.lag["behind_s"], 1))
    response.status_code = 503 if reasons else 200
    return response

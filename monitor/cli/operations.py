"""Running the service: ``monitor up/down/status/check/demo``, ``monitor dlq`` and ``monitor db``."""
from __future__ import annotations

import dataclasses
import sys
import time

import pika

from monitor import amqp, broker, deadletters, stack
from monitor.check import check_page, noise_of
from monitor.cli.common import RuntimeFailure, UsageError, cost, print_json, ts, watch_url
from monitor.log import get_logger
from monitor.messages import Job
from monitor.store import Store, open_store, upgrade
from monitor.urls import redact


# --- the stack -------------------------------------------------------------------------------
def _queue_depths(config) -> dict[str, tuple[int, int | None]]:
    """``{queue: (ready, unacked)}``; a queue the pipeline has not declared yet is left out."""
    if config.local_broker:
        return broker.queue_depths(config)
    connection = amqp.connect(config, get_logger("cli"), attempts=1)
    depths: dict[str, tuple[int, int | None]] = {}
    try:
        for queue in (amqp.JOB_QUEUE, amqp.TASK_QUEUE, amqp.DEAD_LETTER):
            # One channel per queue: the broker closes the channel of a passive declare of a
            # queue that does not exist yet. It reports ready messages only (unacked needs the
            # management API).
            try:
                depths[queue] = (connection.channel().queue_declare(queue, passive=True).method.message_count, None)
            except pika.exceptions.ChannelClosedByBroker:
                pass
        return depths
    finally:
        connection.close()


@dataclasses.dataclass(frozen=True)
class Status:
    """What ``monitor status`` shows and ``/metrics`` and ``/healthz`` serve, gathered once.
    ``process_error`` / ``queue_error`` say why ``processes`` / ``queues`` are empty (supervisord
    or the broker could not be reached)."""
    now: float
    processes: list[dict]
    process_error: str | None
    queues: dict[str, tuple[int, int | None]]
    queue_error: str | None
    summary: dict[str, int]
    rates: dict[str, dict[str, float]]
    lag: dict[str, float | int]
    fleet: dict[str, int]
    cooldowns: dict[str, float]
    costly: list


def gather_status(config, store: Store, now: float | None = None) -> Status:
    """Ask supervisord, the broker and the store how the stack stands; what cannot be reached
    is reported in the result, never raised."""
    now = time.time() if now is None else now
    try:
        procs, proc_error = stack.processes(config), None
    except stack.StackError as exc:
        procs, proc_error = [], str(exc)
    try:
        if proc_error and config.local_broker:  # the node is one of the stack's programs
            raise broker.BrokerError("the local node is not running")
        depths, depth_error = _queue_depths(config), None
    except (broker.BrokerError, amqp.BrokerUnavailable, *amqp.RECOVERABLE, OSError) as exc:
        depths, depth_error = {}, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    states = [w.state for w in store.list_workers()]
    return Status(
        now=now, processes=procs, process_error=proc_error, queues=depths, queue_error=depth_error,
        summary=store.summary(now, config.job_timeout),
        rates={"last_minute": store.check_rates(now, 60), "last_5_minutes": store.check_rates(now, 300)},
        lag=store.schedule_lag(now),
        fleet={state: states.count(state) for state in ("alive", "lost", "stopped")},
        cooldowns=store.cooldowns(now),
        costly=store.costliest(5))


def process_name(info: dict) -> str:
    """``worker:worker_00`` for a process of a group, plain ``processor`` otherwise (as supervisorctl)."""
    return info["name"] if info["group"] == info["name"] else f"{info['group']}:{info['name']}"


def _share(rate: dict[str, float], outcome: str) -> str:
    return f"{100 * rate.get(outcome, 0.0) / rate['total']:.0f}%" if rate["total"] else "-"


def cmd_status(args, config, store) -> None:
    status = gather_status(config, store)
    procs, proc_error, depths, depth_error = status.processes, status.process_error, status.queues, status.queue_error
    summary, rates, lag, fleet = status.summary, status.rates, status.lag, status.fleet
    cooldowns, costly = status.cooldowns, status.costly
    if args.json:
        print_json({"web": config.web_url,
                    "processes": [{"name": process_name(p), "state": p["statename"], "pid": p["pid"]} for p in procs],
                     "queues": {q: {"ready": r, "unacked": u} for q, (r, u) in depths.items()}, "watches": summary,
                     "checks_per_second": rates, "schedule": lag,
                     "workers": fleet, "hosts_in_cooldown": cooldowns,
                     "costliest": [{"id": w.id, "url": redact(w.url), "cost_ms": w.cost_ms} for w in costly]})
    else:
        where = f"local node on 127.0.0.1:{config.local_amqp_port}" if config.local_broker else redact(config.broker_url)
        print(f"home: {config.home}   broker: {where}   web: {config.web_url}")
        print("\nprocesses:")
        if proc_error:
            print(f"  {proc_error}")
        for p in procs:
            print(f"  {process_name(p):<20} {p['statename']:<9} {p['description']}")
        print("\nqueues:")
        if depth_error:
            print(f"  unavailable: {depth_error}")
        for queue in (amqp.JOB_QUEUE, amqp.TASK_QUEUE, amqp.DEAD_LETTER):
            if queue in depths:
                ready, unacked = depths[queue]
                print(f"  {queue:<12} ready {ready:<7} unacked {'?' if unacked is None else unacked}")
            elif not depth_error:
                print(f"  {queue:<12} not declared yet (the pipeline declares it when it connects)")
        print(f"\nwatches: {summary['watches']} ({summary['enabled']} enabled), due {summary['due']}, "
              f"in flight {summary['in_flight']}, failing {summary['failing']}")
        print(f"behind schedule: {lag['behind_s']:.0f}s (most overdue watch), "
              f"{lag['overdue_by_an_interval']} overdue by more than their interval")
        for label, rate in (("last minute", rates["last_minute"]), ("last 5 minutes", rates["last_5_minutes"])):
            print(f"checks, {label}: {rate['total']:.1f}/s (not modified: {_share(rate, 'not_modified_http')} by HTTP 304, "
                  f"{_share(rate, 'not_modified_hash')} by body hash; errors {_share(rate, 'error')})")
        print(f"alerts in the last hour: {summary['alerts_last_hour']}")
        print(f"workers: {fleet['alive']} alive, {fleet['lost']} lost, {fleet['stopped']} stopped (`monitor workers`)")
        if cooldowns:
            print("hosts in cooldown: " + ", ".join(f"{host} until {ts(until)}" for host, until in sorted(cooldowns.items())))
        if costly:
            print("costliest sites: " + ", ".join(f"{redact(w.url)} {cost(w.cost_ms)}" for w in costly[:3]))
    if proc_error:
        raise RuntimeFailure(f"the stack is not running (home {config.home}): `monitor up` starts it")


def cmd_up(args, config, store) -> None:
    if not config.local_broker:
        try:  # another home's stack on that vhost: refuse before starting anything
            amqp.declare_with_blocking_client(config, get_logger("cli"))
        except (amqp.BrokerUnavailable, *amqp.RECOVERABLE):
            pass  # not reachable yet: the programs wait for it (and check again)
    if stack.is_running(config):
        print(f"stack already running (home {config.home}); changed settings such as MONITOR_WORKERS apply "
              "after `monitor down` and `monitor up`")
        return
    started = time.time()
    try:
        stack.up(config)
        infos = stack.wait_started(config)
    except stack.StackError as exc:
        raise RuntimeFailure(str(exc)) from None
    late = [process_name(info) + " " + info["statename"] for info in infos
            if info["statename"] not in ("RUNNING", "STOPPED")]
    if late:
        raise RuntimeFailure("not running: " + ", ".join(late) + f" (see {config.log_dir})")
    missing = stack.wait_ready(config, started)
    if missing:
        raise RuntimeFailure("running but not connected yet: " + ", ".join(missing) + f" (see {config.log_dir})")
    print(f"stack running and connected (home {config.home}); `monitor status` shows it, `monitor down` stops it")


def cmd_down(args, config, store) -> None:
    try:
        stopped = stack.down(config)
    except stack.StackError as exc:
        raise RuntimeFailure(str(exc)) from None
    print("stack stopped" if stopped else "stack was not running")


def cmd_check(args, config, store) -> None:
    url, _ = watch_url(args.url, config)
    selector = None
    if args.selector is not None:
        from monitor.cli.watches import checked_selector  # (that module imports the import formats' parsers)
        selector = checked_selector(args.selector)
    task = check_page(Job(url, 0, selector=selector), config)
    if task.status != "ok":
        raise RuntimeFailure(f"{url}: {task.error}")
    dropped, note = noise_of(task, config.db_path)
    for link in task.context:
        if args.json:
            print_json({**link, "dropped": dropped[link["url"]]} if link["url"] in dropped else link)
        else:
            print(f"{link['url']}  {link['text']}")
    if not args.json:
        for link_url, reason in dropped.items():
            print(f"dropped ({reason}): {link_url}")
        print(f"# {len(task.context)} links from {task.final_url} in {task.elapsed_ms} ms (HTTP {task.http_status}); "
              f"a noise rule would drop {len(dropped)}" + (f" ({note})" if note else ""), file=sys.stderr)



def dead_letters(config) -> deadletters.DeadLetterQueue:
    """A connection to the dead-letter queue (RuntimeFailure when the broker cannot be reached)."""
    try:
        return deadletters.DeadLetterQueue(config)
    except amqp.BrokerUnavailable as exc:
        raise RuntimeFailure(str(exc)) from None


def dead_letter_dict(letter: deadletters.DeadLetter) -> dict:
    """A dead letter as ``dlq list --json`` and the web API show it."""
    return {"id": letter.id, "queue": letter.queue, "reason": letter.reason, "body": letter.text}


def cmd_dlq_list(args, config, store) -> None:
    with dead_letters(config) as dlq:
        letters = dlq.list()
    for letter in letters:
        if args.json:
            print_json(dead_letter_dict(letter))
        else:
            print(f"{letter.id}  from {letter.queue} ({letter.reason})  {letter.preview()}")
    if not args.json:
        print(f"{len(letters)} dead letter(s); at most {config.dead_letter_max} are kept, the oldest dropped first",
              file=sys.stderr)


def replay_dead_letters(config, ids: set[str] | None) -> tuple[list[str], list[str]]:
    """Send dead letters (``ids``, or all of them for None) back to their queue: the ids
    replayed and those asked for that were not found (RuntimeFailure without a broker).
    Shared by ``dlq replay``, the web API and the fleet page."""
    with dead_letters(config) as dlq:
        replayed = [letter.id for letter in dlq.replay(ids)]
    return replayed, sorted(set(ids or ()) - set(replayed))


def cmd_dlq_replay(args, config, store) -> None:
    if args.all == bool(args.ids):
        raise UsageError("give dead-letter IDs (see `monitor dlq list`) or --all")
    replayed, missing = replay_dead_letters(config, None if args.all else set(args.ids))
    print(f"replayed {len(replayed)} message(s)")
    if missing:
        raise UsageError(f"not in dead_letter (or not replayable): {', '.join(missing)}")


def purge_dead_letters(config) -> int:
    """Delete every dead letter: how many there were (RuntimeFailure without a broker).
    Shared by ``dlq purge`` and the web API."""
    with dead_letters(config) as dlq:
        return dlq.purge()


def cmd_dlq_purge(args, config, store) -> None:
    print(f"purged {purge_dead_letters(config)} dead letter(s)")


def cmd_db_upgrade(args, config, store) -> None:
    plain = Store(config.db_path)  # not open_store: that would apply the migrations before we can report them
    try:
        applied = upgrade(plain.conn)
    finally:
        plain.close()
    print("applied: " + ", ".join(applied) if applied else "database is up to date")


def cmd_demo(args, config, store) -> None:
    """A stack of its own under $MONITOR_HOME/demo, watching a local site that keeps publishing."""
    from monitor.demo import LocalSite

    if not config.local_broker and not args.external_broker:
        raise UsageError("AMQP_URL names a broker another stack may use, and the demo's processes would take its "
                         "messages: unset AMQP_URL (the demo runs a private node), or pass --external-broker for a "
                         "broker (vhost) of the demo's own")
    demo = dataclasses.replace(config, home=config.home / "demo", allow_private=True, amqp_port=None)
    site = LocalSite().start()
    # As many stories as a homepage shows at least: fewer would not be taken as the baseline at once.
    url = site.add_page("/", [(f"/stories/{n}", f"Story number {n}") for n in range(1, 9)])
    site.autopublish("/", every=args.every)
    print(f"demo site on {url}: a new story every {args.every:g}s; starting a stack under {demo.home}", flush=True)
    demo_store = open_store(demo.db_path)
    watch = None
    try:
        started = time.time()
        stack.up(demo)
        watch = demo_store.add_watch(url, 5, name="demo")
        demo_store.make_due([watch.id], started)  # the baseline as soon as the stack is connected
        missing = stack.wait_ready(demo, started)
        if missing:
            raise RuntimeFailure("the demo's stack did not connect: " + ", ".join(missing) + f" (see {demo.log_dir})")
        until = "Ctrl-C to stop" if args.duration is None else f"stops after {args.duration:g}s, or Ctrl-C"
        print(f"stack ready in {time.time() - started:.0f}s; watching the site as watch {watch.id} every 5s: "
              f"the first check is the baseline, then each new story is an alert ({until})", flush=True)
        deadline = None if args.duration is None else time.time() + args.duration
        last = 0
        while deadline is None or time.time() < deadline:
            for rowid, alert in demo_store.alerts(0, watch.id, after_rowid=last):
                last = rowid
                print(f"{ts(alert['first_seen'])}  NEW  {alert['url']}  {alert['text']}", flush=True)
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    except stack.StackError as exc:
        raise RuntimeFailure(str(exc)) from None
    finally:
        site.stop()
        if watch is not None:
            demo_store.remove_watch(watch.id)  # its site is gone; the next demo starts afresh
        print("stopping the demo's stack...", flush=True)
        stack.down(demo)
        demo_store.close()
        print("demo stopped; its data stays in " + str(demo.home))

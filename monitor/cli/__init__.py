"""The ``monitor`` command line: edit the watch list, see what was found, run the stack.

Exit codes: 0 success, 1 runtime failure (broker or supervisord unreachable, fetch failed),
2 usage error (bad URL, unknown id, duplicate, bad interval). Errors are one line on stderr.
The work of a command is done by plain functions that return values and raise UsageError,
RuntimeFailure or the store's NotFound (shared with the web API); the ``cmd_*`` handlers print.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from typing import Callable, NoReturn

from monitor import config as configuration
from monitor.cli.common import RuntimeFailure, UsageError
from monitor.store import MAX_ID, NotFound, open_store, parse_id


def _lazy(module: str, function: str) -> Callable:
    """The command ``monitor.cli.MODULE.FUNCTION``, imported only when it runs: importing
    every command's dependencies (broker client, parsers, supervisor) took 180 ms of every
    start, longer than most commands themselves."""
    def command(args: argparse.Namespace, config: configuration.Config, store) -> None:
        getattr(importlib.import_module(f"monitor.cli.{module}"), function)(args, config, store)
    return command


def _version() -> str:
    try:
        return importlib.metadata.version("homepage-monitor")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors in the one-line form every other error has."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"monitor: error: {message} (see `{self.prog} --help`)\n")


IGNORE_PARAM = "compare its links without this query parameter (a session id, a cache-buster); repeatable"

# Options whose value may start with "-": argparse would take `--interval -5m` for two
# options and say "expected one argument"; joined, the value is checked and refused by name.
_VALUE_OPTIONS = ("--interval", "--since", "--limit", "--every", "--duration")


def _attach_values(argv: list[str]) -> list[str]:
    joined: list[str] = []
    for arg in argv:
        if joined and joined[-1] in _VALUE_OPTIONS and arg[:1] == "-" and arg[1:2].isdigit():
            joined[-1] = f"{joined[-1]}={arg}"
        else:
            joined.append(arg)
    return joined


def positive_int(text: str) -> int:
    """argparse type: a whole number from 1 to SQLite's largest integer."""
    number = parse_id(text)
    if not number or number > MAX_ID:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a positive whole number")
    return number


def positive_float(text: str) -> float:
    """argparse type: seconds (``3``, ``2.5`` or ``3s``), above 0 and at most a day."""
    try:
        number = float(text.removesuffix("s"))
    except ValueError:
        number = 0.0
    if not 0 < number <= 86400:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds above 0 and at most 86400")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="monitor", description="Watch homepages; get an alert for every newly published link.")
    parser.add_argument("--version", action="version", version=f"monitor {_version()}")
    sub = parser.add_subparsers(dest="group", required=True, metavar="COMMAND")

    watch = sub.add_parser("watch", help="edit the watch list").add_subparsers(dest="command", required=True, metavar="ACTION")
    p = watch.add_parser("add", help="watch a homepage")
    p.add_argument("url")
    p.add_argument("--interval", help="how often to check: 30s, 5m, 2h, 1d (default 5m)")
    p.add_argument("--name")
    p.add_argument("--tag")
    p.add_argument("--selector", metavar="CSS", help="only links inside the regions this CSS selector matches ('main, #latest')")
    p.add_argument("--ignore-param", action="append", metavar="NAME", help=IGNORE_PARAM)
    p.set_defaults(func=_lazy("watches", "cmd_watch_add"))
    p = watch.add_parser("list", help="the watch list with its last results")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_lazy("watches", "cmd_watch_list"))
    p = watch.add_parser("remove", help="stop watching (ID or URL); its links and alerts go too")
    p.add_argument("ref", metavar="ID|URL")
    p.set_defaults(func=_lazy("watches", "cmd_watch_remove"))
    for name in ("enable", "disable"):
        p = watch.add_parser(name, help=f"{name} checking a watch")
        p.add_argument("id", metavar="ID|URL")
        p.set_defaults(func=_lazy("watches", "cmd_watch_enable"))
    p = watch.add_parser("set", help="change a watch's interval, selector, name or tag")
    p.add_argument("id", metavar="ID|URL")
    p.add_argument("--interval")
    p.add_argument("--name", help="a new name ('' for none; at most 200 characters, one line)")
    p.add_argument("--tag", help="a new tag ('' for none; at most 200 characters, one line)")
    p.add_argument("--selector", metavar="CSS", help="only links inside the regions it matches ('' for the whole page)")
    p.add_argument("--ignore-param", action="append", metavar="NAME", help=IGNORE_PARAM + " ('' for none)")
    p.add_argument("--forget-volatile", action="store_true",
                   help="compare its links with the query parameters found to change on every check again")
    p.set_defaults(func=_lazy("watches", "cmd_watch_set"))
    p = watch.add_parser("import", help="add watches from a file: URLs one per line, CSV url,interval,name,tag, "
                                        "urlwatch's urls.yaml, OPML, changedetection.io's export")
    p.add_argument("file")
    # The names are checked by the command: listing them here from monitor.imports would
    # import it (and its parsers) at every start of every command.
    p.add_argument("--format", default="auto",
                   help="auto (the default: from the extension and content), list, csv, urlwatch, opml or changedetection")
    p.set_defaults(func=_lazy("watches", "cmd_watch_import"))
    watch.add_parser("export", help="print the watch list as CSV (import reads it back)").set_defaults(func=_lazy("watches", "cmd_watch_export"))
    p = watch.add_parser("recheck", help="check now, regardless of the schedule")
    p.add_argument("ref", nargs="?", metavar="ID|URL")
    p.add_argument("--all", action="store_true", help="every enabled watch")
    p.set_defaults(func=_lazy("watches", "cmd_watch_recheck"))

    p = sub.add_parser("links", help="links known for a watch, newest first")
    p.add_argument("ref", metavar="ID|URL")
    p.add_argument("--limit", type=positive_int, help="at most this many (the newest)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("watches", "cmd_links"))
    p = sub.add_parser("alerts", help="new links found; `alerts failed|retry`: deliveries given up on")
    p.add_argument("--watch", metavar="ID|URL")
    p.add_argument("--since", metavar="DURATION", help="e.g. 1h, 2d")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new alerts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("watches", "cmd_alerts"))
    alerts = p.add_subparsers(dest="command", metavar="ACTION")
    p = alerts.add_parser("failed", help="deliveries a sink gave up on (its dead letters)")
    p.add_argument("--sink", metavar="NAME")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("sinks", "cmd_alerts_failed"))
    p = alerts.add_parser("retry", help="make failed deliveries pending again")
    p.add_argument("alert_ids", nargs="*", metavar="ALERT_ID")
    p.add_argument("--all", action="store_true", help="every failed delivery (of --sink, when given)")
    p.add_argument("--sink", metavar="NAME")
    p.set_defaults(func=_lazy("sinks", "cmd_alerts_retry"))

    rules = sub.add_parser("filter", help="rules that hold back alerts: keywords, URL patterns, same site, noise").add_subparsers(
        dest="command", required=True, metavar="ACTION")
    p = rules.add_parser("add", help="add a rule (held-back links are still recorded, never alerted later)")
    p.add_argument("rule", choices=["include", "exclude", "url-allow", "url-deny", "same-site", "noise"])
    p.add_argument("pattern", nargs="?", metavar="PATTERN", help="words, or /a regular expression/ (case-insensitive)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--watch", metavar="ID|URL", help="for this watch only")
    scope.add_argument("--tag", help="for the watches with this tag")
    p.set_defaults(func=_lazy("filters", "cmd_filter_add"))
    p = rules.add_parser("list", help="the rules")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("filters", "cmd_filter_list"))
    p = rules.add_parser("remove", help="remove a rule")
    p.add_argument("id", metavar="ID")
    p.set_defaults(func=_lazy("filters", "cmd_filter_remove"))

    sink = sub.add_parser("sink", help="where alerts are delivered: webhook, e-mail, Apprise").add_subparsers(
        dest="command", required=True, metavar="ACTION")
    p = sink.add_parser("add", help="deliver alerts to a channel (`monitor sink kinds` explains each KIND and TARGET)")
    p.add_argument("kind", metavar="KIND", help="webhook, email or apprise")
    p.add_argument("target", metavar="TARGET")
    p.add_argument("--name", help="how to refer to it (default KIND-N)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--watch", metavar="ID|URL", help="only this watch's alerts")
    scope.add_argument("--tag", help="only the alerts of watches with this tag")
    p.add_argument("--secret", help="webhook: sign each body (X-Monitor-Signature: sha256=HMAC)")
    p.add_argument("--header", action="append", metavar="'NAME: VALUE'", help="webhook: add a header (repeatable)")
    p.add_argument("--digest", metavar="DURATION", help="email: one mail per period (e.g. 15m) listing its alerts")
    p.set_defaults(func=_lazy("sinks", "cmd_sink_add"))
    p = sink.add_parser("list", help="sinks (secrets masked) with delivered, pending, failed, failing since, last error")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("sinks", "cmd_sink_list"))
    p = sink.add_parser("remove", help="stop delivering to a sink")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=_lazy("sinks", "cmd_sink_remove"))
    p = sink.add_parser("test", help="send one test alert to a sink now and say how it went")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=_lazy("sinks", "cmd_sink_test"))
    sink.add_parser("kinds", help="the kinds of sink and how to write their TARGET").set_defaults(
        func=_lazy("sinks", "cmd_sink_kinds"), home="none")
    p = sub.add_parser("status", help="processes, queue depths, watches due/in flight/failing, recent alerts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("operations", "cmd_status"))
    sub.add_parser("up", help="start the whole stack under supervisord").set_defaults(func=_lazy("operations", "cmd_up"),
                                                                                       home="create")
    sub.add_parser("down", help="stop the whole stack").set_defaults(func=_lazy("operations", "cmd_down"))
    p = sub.add_parser("ctl", help="run supervisorctl against this stack (e.g. `monitor ctl status`)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=None)
    p = sub.add_parser("check", help="fetch one page once, print its links and those a noise rule would drop")
    p.add_argument("url")
    p.add_argument("--selector", metavar="CSS", help="only links inside the regions this CSS selector matches")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("operations", "cmd_check"), home="none")
    proxy = sub.add_parser("proxy", help="the proxy pool (VPN exits)").add_subparsers(dest="command", required=True, metavar="ACTION")
    p = proxy.add_parser("add", help="add a proxy: http://, https://, socks5:// with optional user:password@ "
                                     "(tested first: a page is fetched through it)")
    p.add_argument("url")
    p.add_argument("--page", default="https://example.org/", help="the page of the test (default https://example.org/)")
    p.add_argument("--no-test", action="store_true", help="add it without trying it")
    p.set_defaults(func=_lazy("fleet", "cmd_proxy_add"))
    p = proxy.add_parser("list", help="proxies (passwords masked), lease, last error, requests, refusals")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("fleet", "cmd_proxy_list"))
    p = proxy.add_parser("remove", help="remove a proxy (ID or URL)")
    p.add_argument("ref", metavar="ID|URL")
    p.set_defaults(func=_lazy("fleet", "cmd_proxy_remove"))
    p = proxy.add_parser("test", help="fetch a page through a proxy (ID or URL) and say how it went")
    p.add_argument("ref", metavar="ID|URL")
    p.add_argument("--page", default="https://example.org/", help="the page to fetch (default https://example.org/)")
    p.set_defaults(func=_lazy("fleet", "cmd_proxy_test"))
    p = sub.add_parser("hosts", help="hosts on the disable list: until when, why, which exits they refused")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("fleet", "cmd_hosts"))
    hosts = p.add_subparsers(dest="command", metavar="ACTION")
    p = hosts.add_parser("enable", help="lift a host's cooldown now, in every worker")
    p.add_argument("host")
    p.set_defaults(func=_lazy("fleet", "cmd_hosts_enable"))
    p = sub.add_parser("workers", help="the worker fleet: state, last heartbeat, jobs, proxies")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("fleet", "cmd_workers"))
    dlq = sub.add_parser("dlq", help="messages the pipeline refused").add_subparsers(dest="command", required=True, metavar="ACTION")
    p = dlq.add_parser("list", help="show dead letters: id, origin queue, reason, body")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("operations", "cmd_dlq_list"), needs_store=False)
    p = dlq.add_parser("replay", help="send dead letters back to the queue they came from")
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--all", action="store_true")
    p.set_defaults(func=_lazy("operations", "cmd_dlq_replay"), needs_store=False)
    dlq.add_parser("purge", help="delete every dead letter").set_defaults(func=_lazy("operations", "cmd_dlq_purge"), needs_store=False)
    db = sub.add_parser("db", help="database maintenance").add_subparsers(dest="command", required=True, metavar="ACTION")
    db.add_parser("upgrade", help="apply pending migrations (creates the home if there is none)").set_defaults(
        func=_lazy("operations", "cmd_db_upgrade"), needs_store=False, home="create")
    p = sub.add_parser("demo", help="run a local site that publishes links, watch it, show alerts")
    p.add_argument("--every", type=positive_float, default=3.0, help="seconds between new stories (default 3)")
    p.add_argument("--duration", type=positive_float, help="stop after this many seconds (default: at Ctrl-C)")
    p.add_argument("--external-broker", action="store_true",
                   help="run on AMQP_URL's broker anyway (only one the demo has to itself)")
    p.set_defaults(func=_lazy("operations", "cmd_demo"), home="create")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(_attach_values(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # a usage error or --help: argparse has said what it had to
        return int(exc.code or 0)
    try:
        config = configuration.load()
    except configuration.ConfigError as exc:
        print(f"monitor: configuration error: {exc}", file=sys.stderr)
        return 2
    home = getattr(args, "home", "require")  # "create" (up, demo, db upgrade), "require" or "none" (check)
    if home == "require" and not config.db_path.exists():
        print(f"monitor: error: no monitor home at {config.home} (nothing there): `monitor up` creates one, "
              "MONITOR_HOME names another", file=sys.stderr)
        return 2
    if args.func is None:  # ctl
        from monitor import stack
        return stack.ctl(config, args.args)
    store = None
    try:
        if home != "none" and getattr(args, "needs_store", True):
            store = open_store(config.db_path)
        args.func(args, config, store)
        return 0
    except configuration.ConfigError as exc:  # e.g. another home owns the broker's vhost
        print(f"monitor: configuration error: {exc}", file=sys.stderr)
        return 2
    except (UsageError, NotFound) as exc:  # (NotFound: the id or name a command was given)
        print(f"monitor: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeFailure as exc:
        print(f"monitor: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    finally:
        if store is not None:
            store.close()


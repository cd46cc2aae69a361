"""Where alerts go.

* :mod:`monitor.sinks.local`: the processor's own sinks, written in the step that makes an
  alert durable: ``alerts.jsonl`` (exactly once) and the log.
* :mod:`monitor.sinks.channels`: the channels people read (webhook, e-mail, Apprise), a
  registry of kinds the notifier delivers to, each alert at least once and recorded once
  per sink, retrying a failing sink without delaying the others.
* :mod:`monitor.sinks.feeds`: Atom feeds (all alerts, per watch, per tag) the notifier
  rewrites as alerts arrive.
"""
from monitor.sinks.local import JsonLinesSink, LogSink, Sink, build_sinks

__all__ = ["JsonLinesSink", "LogSink", "Sink", "build_sinks"]

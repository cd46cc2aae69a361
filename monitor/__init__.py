"""homepage-monitor: the shared core (configuration, URLs, codes, extraction, messages,
AMQP topology, stores, alert sinks) and the ``monitor`` command line."""

__version__ = "0.1.0"

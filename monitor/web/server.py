"""The ``web`` program supervisord runs: the web front on ``MONITOR_WEB_BIND`` (default
127.0.0.1 and a port derived from the home, like the broker's), served by waitress.

Off loopback it refuses to start without a token (exit 2, the reason in its log): a
dashboard that can add and remove watches is not left open to a network.
"""
from __future__ import annotations

import sys

from monitor import config as configuration
from monitor.log import get_logger
from monitor.web.app import create_app
from monitor.web.auth import is_loopback


def main() -> None:
    log = get_logger("web")
    try:
        config = configuration.load()
    except configuration.ConfigError as exc:
        log.error("configuration refused", reason=str(exc))
        sys.exit(2)
    host, port = config.web_address
    if not is_loopback(host) and not config.web_token:
        log.error("refusing to serve off loopback without a token: set MONITOR_WEB_TOKEN",
                  bind=f"{host}:{port}")
        sys.exit(2)
    import waitress  # imported here: only this process serves HTTP

    log.info("serving", url=config.web_url, token_required=bool(config.web_token))
    waitress.serve(create_app(config), host=host, port=port, threads=8, ident="monitor", _quiet=True)


if __name__ == "__main__":
    main()

"""The channels the notifier delivers alerts to: a registry of sink kinds.

Each kind is a small class registered with :func:`kind`; its docstring is its user
documentation (``monitor sink kinds`` prints it). A channel is built from a sink's TARGET
and options, refusing a bad one with a one-line :class:`BadTarget` before anything is
stored, and ``send(alerts)`` delivers up to ``batch`` alerts or raises
:class:`DeliveryFailed` with a one-line reason. An alert is a dict: ``alert_id``,
``watch_id``, ``baseUrl`` (the watched page), ``watch_name``, ``tag``, ``url``, ``text``,
``first_seen``.
"""
from __future__ import annotations

import hashlib
import hmac
import html
import json
import re
import smtplib
import ssl
import time
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Callable, ClassVar, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

import urllib3

from monitor.urls import redact

USER_AGENT = "homepage-monitor/0.1 (alert delivery)"
PUBLIC_FIELDS = ("alert_id", "watch_id", "baseUrl", "watch_name", "tag", "url", "text", "first_seen")


class BadTarget(ValueError):
    """A sink's TARGET or options cannot work; the text says why, secrets masked."""


class DeliveryFailed(RuntimeError):
    """The channel did not take the alerts (they are tried again later)."""


class Channel(Protocol):
    kind: ClassVar[str]
    batch: ClassVar[int]  # alerts per send()

    def send(self, alerts: list[dict]) -> None: ...


KINDS: dict[str, Callable[[str, dict], Channel]] = {}


def kind(cls):
    """Register a channel class under its ``kind``."""
    KINDS[cls.kind] = cls
    return cls


def build(kind_name: str, target: str, options: dict) -> Channel:
    """The channel of a sink, or :class:`BadTarget`."""
    if kind_name not in KINDS:
        raise BadTarget(f"unknown sink kind {kind_name!r}: one of {', '.join(sorted(KINDS))}")
    return KINDS[kind_name](target, options)


_HOST_PORT = re.compile(r"^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$")
# Schemes whose host is a server's name; elsewhere (ntfy topics, chat ids) it may be a secret.
_SERVER_SCHEMES = {"http", "https", "smtp", "smtps", "json", "jsons", "xml", "xmls", "form", "forms"}


def mask(target: str) -> str:
    """A target as it may be shown: its scheme, user, host and port; the password, the
    path and the query (where webhook and chat tokens live) replaced by ``***``, and so
    is the host part unless the scheme names a server there (a Telegram bot token, an ntfy
    topic sit there)."""
    scheme, sep, rest = target.partition("://")
    if not sep:
        return "***"
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, host = netloc.rpartition("@")
    user = f"{unquote(userinfo.partition(':')[0])}:***@" if at else ""
    shown = host if scheme.lower() in _SERVER_SCHEMES and _HOST_PORT.match(host) else "***"
    tail = "/***" if rest[len(netloc):].strip("/") else ""
    return f"{scheme}://{user}{shown}{tail}"


def public(alert: dict) -> dict:
    """The fields an alert carries to a channel."""
    return {field: alert.get(field) for field in PUBLIC_FIELDS}


def _when(alert: dict) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(alert["first_seen"]))


def _page(alert: dict) -> str:
    return alert.get("watch_name") or redact(alert["baseUrl"])


@kind
class Webhook:
    """webhook TARGET: an http:// or https:// URL.

    Each delivery is one JSON POST of up to 100 alerts:
    {"alerts": [{"alert_id", "watch_id", "baseUrl", "watch_name", "tag", "url", "text", "first_seen"}]}.
    A 2xx answer means delivered; anything else (or no answer in 20 s) is tried again later.
    An alert can arrive twice (after a crash, or a timeout on an answer that was sent):
    drop duplicates by alert_id.
    Options: --secret S adds the header X-Monitor-Signature: sha256=<hex HMAC-SHA256 of the
    body with S>; --header 'Name: value' adds a header (repeatable).
    """

    kind = "webhook"
    batch = 100

    def __init__(self, target: str, options: dict) -> None:
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadTarget(f"{mask(target)}: a webhook TARGET is an http:// or https:// URL")
        self.target = target
        self.secret = options.get("secret")
        self.headers = dict(options.get("headers") or {})
        self.http = urllib3.PoolManager(num_pools=2, maxsize=1, retries=False,
                                        timeout=urllib3.Timeout(connect=5.0, read=15.0))

    def send(self, alerts: list[dict]) -> None:
        body = json.dumps({"alerts": [public(alert) for alert in alerts]}, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **self.headers}
        if self.secret:
            digest = hmac.new(self.secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
            headers["X-Monitor-Signature"] = f"sha256={digest}"
        try:
            response = self.http.request("POST", self.target, body=body, headers=headers, redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            raise DeliveryFailed(f"no answer from {mask(self.target)}: {type(exc).__name__}") from None
        if not 200 <= response.status < 300:
            raise DeliveryFailed(f"{mask(self.target)} answered HTTP {response.status}")


@kind
class Email:
    """email TARGET: smtp://user:password@host:port?to=you@example.org&from=monitor@example.org&starttls=1

    One mail per alert: the link text is the subject; the body names the link, the watched
    page and when the link was first seen, in plain text and HTML. smtps:// speaks TLS from
    the start (port 465), starttls=1 upgrades a plain connection (port 587); several to=
    are allowed; leave out user:password@ for a server without login.
    """

    kind = "email"
    batch = 1

    def __init__(self, target: str, options: dict) -> None:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise BadTarget(f"{mask(target)}: an email TARGET is smtp://[user:password@]host[:port]?to=ADDRESS&from=ADDRESS")
        self.recipients = query.get("to", [])
        if not self.recipients or not all("@" in address for address in self.recipients):
            raise BadTarget(f"{mask(target)}: say who gets the mail with to=ADDRESS")
        self.sender = query.get("from", ["homepage-monitor@localhost"])[0]
        self.tls = parts.scheme == "smtps"
        self.starttls = query.get("starttls", ["0"])[0] in ("1", "true", "yes")
        self.host, self.port = parts.hostname, parts.port or (465 if self.tls else 25)
        self.login = (unquote(parts.username), unquote(parts.password or "")) if parts.username else None
        self.name = mask(target)

    def message(self, alert: dict) -> EmailMessage:
        mail = EmailMessage()
        mail["Subject"] = alert["text"] or alert["url"]
        mail["From"] = self.sender
        mail["To"] = ", ".join(self.recipients)
        mail["Date"] = formatdate(alert["first_seen"], localtime=True)
        mail["Message-ID"] = make_msgid(idstring=alert["alert_id"])  # a mail sent twice can be told apart
        mail["X-Monitor-Alert-Id"] = alert["alert_id"]
        mail.set_content(f"New link on {_page(alert)}:\n\n{alert['text']}\n{alert['url']}\n\n"
                         f"First seen {_when(alert)} on {redact(alert['baseUrl'])}\n")
        mail.add_alternative(
            f"<p>New link on <a href=\"{html.escape(redact(alert['baseUrl']))}\">{html.escape(_page(alert))}</a>:</p>"
            f"<p><a href=\"{html.escape(alert['url'])}\">{html.escape(alert['text'] or alert['url'])}</a></p>"
            f"<p>First seen {html.escape(_when(alert))}</p>", subtype="html")
        return mail

    def send(self, alerts: list[dict]) -> None:
        try:
            factory = smtplib.SMTP_SSL if self.tls else smtplib.SMTP
            with factory(self.host, self.port, timeout=20) as smtp:
                if self.starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if self.login:
                    smtp.login(*self.login)
                for alert in alerts:
                    smtp.send_message(self.message(alert))
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryFailed(f"{self.name}: {type(exc).__name__}: {str(exc)[:200]}") from None


@kind
class Apprise:
    """apprise TARGET: an Apprise URL (https://github.com/caronc/apprise/wiki), e.g.
    tgram://BOT_TOKEN/CHAT_ID, slack://TOKEN_A/TOKEN_B/TOKEN_C, discord://ID/TOKEN,
    ntfys://TOPIC, gotify://HOST/TOKEN, pover://USER@TOKEN, msteams://..., matrix://...,
    json://HOST/PATH.

    One notification per alert: the link text is the title; the link, the watched page and
    when it was first seen are the body.
    """

    kind = "apprise"
    batch = 1

    def __init__(self, target: str, options: dict) -> None:
        import apprise  # imported on first use: it loads a plugin per service

        self.apprise = apprise.Apprise()
        if not self.apprise.add(target):
            raise BadTarget(f"{mask(target)}: not an Apprise URL Apprise understands")
        self.name = mask(target)

    def send(self, alerts: list[dict]) -> None:
        for alert in alerts:
            body = f"{alert['url']}\non {_page(alert)}, first seen {_when(alert)}"
            if not self.apprise.notify(title=alert["text"] or alert["url"], body=body):
                raise DeliveryFailed(f"{self.name}: Apprise could not deliver the notification")

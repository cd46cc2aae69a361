"""The channels the notifier delivers alerts to: a registry of sink kinds.

Each kind is a small class registered with :func:`kind`; its docstring is its user
documentation (``monitor sink kinds`` prints it). A channel is built from a sink's TARGET
and options, refusing a bad one with a one-line :class:`BadTarget` before anything is
stored, and ``send(alerts)`` delivers up to ``batch`` alerts or raises
:class:`DeliveryFailed` with a one-line reason. A channel that gathers alerts (an e-mail
digest) says for how long in ``hold``: the notifier keeps its due alerts back until the
oldest has waited that long, or ``batch`` are waiting. An alert is a dict: ``alert_id``,
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

from monitor.durations import MAXIMUM, format_duration
from monitor.urls import redact

USER_AGENT = "homepage-monitor/0.1 (alert delivery)"
PUBLIC_FIELDS = ("alert_id", "watch_id", "baseUrl", "watch_name", "tag", "url", "text", "first_seen")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # a sink's name, as commands and the TOML file write it
DIGEST_MOST = 500  # alerts in one digest mail: past it, the mail goes at once and a new digest starts


class BadTarget(ValueError):
    """A sink's TARGET or options cannot work; the text says why, secrets masked."""


class DeliveryFailed(RuntimeError):
    """The channel did not take the alerts (they are tried again later)."""


class Channel(Protocol):
    kind: ClassVar[str]
    batch: int  # alerts per send()
    hold: float  # seconds the oldest due alert waits for others to join its send (0: none)

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
    try:
        return KINDS[kind_name](target, options)
    except BadTarget:
        raise
    except ValueError as exc:  # urlsplit's own complaints (an unclosed "[", a port past 65535)
        raise BadTarget(f"{mask(target)}: not a valid {kind_name} TARGET: {exc}") from None


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


def refuse_options(kind_name: str, options: dict, allowed: set[str]) -> None:
    """Raise :class:`BadTarget` for an option ``kind_name`` sinks do not take."""
    for option in sorted(set(options) - allowed):
        takes = f" (only {', '.join(sorted(allowed))})" if allowed else ""
        raise BadTarget(f"{kind_name} sinks take no {option} option{takes}")


def public(alert: dict) -> dict:
    """The fields an alert carries to a channel."""
    return {field: alert.get(field) for field in PUBLIC_FIELDS}


def _when(alert: dict) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(alert["first_seen"]))


def _page(alert: dict) -> str:
    return alert.get("watch_name") or redact(alert["baseUrl"])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


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
    hold = 0.0

    def __init__(self, target: str, options: dict) -> None:
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadTarget(f"{mask(target)}: a webhook TARGET is an http:// or https:// URL")
        refuse_options(self.kind, options, {"secret", "headers"})
        self.target = target
        self.secret = options.get("secret")
        self.headers = dict(options.get("headers") or {})
        for name, value in self.headers.items():
            # (Control characters, \r among them, would be refused at sending, with the value in the error.)
            if not re.fullmatch(r"[A-Za-z0-9-]+", name) or not isinstance(value, str) \
                    or re.search(r"[\x00-\x1f\x7f]", value.replace("\t", " ")):
                raise BadTarget(f"header {name[:40]!r}: a name of letters, digits and '-', a value of one line "
                                "without control characters")
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
    Option: --digest 15m sends one mail per period instead: the alerts of the 15 minutes
    after the first, grouped by watched page, subject "12 new links on 3 pages" (at most
    500 alerts a mail). A digest that fails is sent again whole.
    """

    kind = "email"

    def __init__(self, target: str, options: dict) -> None:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise BadTarget(f"{mask(target)}: an email TARGET is smtp://[user:password@]host[:port]?to=ADDRESS&from=ADDRESS")
        refuse_options(self.kind, options, {"digest"})
        digest = options.get("digest", 0)
        if type(digest) is not int or not 0 <= digest <= MAXIMUM:
            raise BadTarget(f"digest {digest!r}: a number of seconds, at most {format_duration(MAXIMUM)}")
        self.hold = float(digest)
        self.batch = DIGEST_MOST if digest else 1
        self.recipients = query.get("to", [])
        if not self.recipients or not all("@" in address for address in self.recipients):
            raise BadTarget(f"{mask(target)}: say who gets the mail with to=ADDRESS")
        self.sender = query.get("from", ["homepage-monitor@localhost"])[0]
        self.tls = parts.scheme == "smtps"
        self.starttls = query.get("starttls", ["0"])[0] in ("1", "true", "yes")
        self.host, self.port = parts.hostname, parts.port or (465 if self.tls else 25)
        self.login = (unquote(parts.username), unquote(parts.password or "")) if parts.username else None
        self.name = mask(target)

    def _mail(self, subject: str, when: float) -> EmailMessage:
        mail = EmailMessage()
        mail["Subject"] = subject
        mail["From"] = self.sender
        mail["To"] = ", ".join(self.recipients)
        mail["Date"] = formatdate(when, localtime=True)
        return mail

    def message(self, alert: dict) -> EmailMessage:
        """The mail of one alert: its link text as the subject."""
        mail = self._mail(alert["text"] or alert["url"], alert["first_seen"])
        mail["Message-ID"] = make_msgid(idstring=alert["alert_id"])  # a mail sent twice can be told apart
        mail["X-Monitor-Alert-Id"] = alert["alert_id"]
        mail.set_content(f"New link on {_page(alert)}:\n\n{alert['text']}\n{alert['url']}\n\n"
                         f"First seen {_when(alert)} on {redact(alert['baseUrl'])}\n")
        mail.add_alternative(
            f"<p>New link on <a href=\"{html.escape(redact(alert['baseUrl']))}\">{html.escape(_page(alert))}</a>:</p>"
            f"<p><a href=\"{html.escape(alert['url'])}\">{html.escape(alert['text'] or alert['url'])}</a></p>"
            f"<p>First seen {html.escape(_when(alert))}</p>", subtype="html")
        return mail

    def digest(self, alerts: list[dict]) -> EmailMessage:
        """One mail listing ``alerts`` (oldest first) grouped by watched page."""
        pages: dict[int, list[dict]] = {}
        for alert in alerts:
            pages.setdefault(alert["watch_id"], []).append(alert)
        mail = self._mail(f"{_count(len(alerts), 'new link')} on {_count(len(pages), 'page')}",
                          max(alert["first_seen"] for alert in alerts))
        mail["Message-ID"] = make_msgid(idstring="digest")
        # Receivers that file alerts drop the ones they have (a digest is sent again whole
        # after a failure); the header folds at the spaces however many there are.
        mail["X-Monitor-Alert-Ids"] = " ".join(alert["alert_id"] for alert in alerts)
        text, markup = [], []
        for found in pages.values():
            page, address = _page(found[0]), redact(found[0]["baseUrl"])
            heading = page if page == address else f"{page} ({address})"
            text.append(f"{heading}\n" + "".join(f"  {a['text']}\n  {a['url']}\n" if a["text"] else f"  {a['url']}\n"
                                                  for a in found))
            items = "".join(f"<li><a href=\"{html.escape(a['url'])}\">{html.escape(a['text'] or a['url'])}</a> "
                            f"<small>{html.escape(_when(a))}</small></li>" for a in found)
            markup.append(f"<h3><a href=\"{html.escape(address)}\">{html.escape(page)}</a></h3><ul>{items}</ul>")
        mail.set_content(f"{mail['Subject']}\n\n" + "\n".join(text))
        mail.add_alternative(f"<p>{html.escape(mail['Subject'])}</p>" + "".join(markup), subtype="html")
        return mail

    def send(self, alerts: list[dict]) -> None:
        try:
            factory = smtplib.SMTP_SSL if self.tls else smtplib.SMTP
            with factory(self.host, self.port, timeout=20) as smtp:
                if self.starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if self.login:
                    smtp.login(*self.login)
                digest = self.hold and len(alerts) > 1  # a digest of one alert is that alert's mail
                for mail in [self.digest(alerts)] if digest else map(self.message, alerts):
                    smtp.send_message(mail)
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
    hold = 0.0

    def __init__(self, target: str, options: dict) -> None:
        refuse_options(self.kind, options, set())
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

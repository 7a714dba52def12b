"""A webhook URL as a run, a plan or a schedule may name it: checked when it is given.

Its host must pass the egress filter's static check (``egress.check_url``: no loopback,
private or metadata address literal in any spelling, no ``localhost``, unless
``DAGWRIGHT_EGRESS_ALLOW`` lists it); the names it resolves to are checked again at each
send. A URL carrying a user name or password is refused: it would be stored in Redis and
shown in every delivery record, and a receiver authenticates deliveries by their
signature (``secret_env``) instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from dagwright.egress import EgressPolicy, check_url
from dagwright.errors import InputError
from dagwright.models import Webhook


def check_webhooks(webhooks: Sequence[Webhook], policy: EgressPolicy) -> None:
    """InputError (one line) for the first webhook whose URL may not be used."""
    for hook in webhooks:
        check_webhook_url(hook.url, policy)


def check_webhook_url(url: str, policy: EgressPolicy) -> None:
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise InputError(
            f"webhook {shown_url(url)}: put no user name or password in a webhook URL (it "
            "would be stored and shown); receivers check the signature instead: give the "
            "webhook a secret_env (DAGWRIGHT_WEBHOOK_SECRET_<NAME>)"
        )
    try:
        check_url(url, policy)
    except InputError as exc:
        raise type(exc)(f"webhook {url}: {exc}") from None


def shown_url(url: str) -> str:
    """``url`` with its user information masked (``https://***@host/...``), for every
    view of a webhook: messages, logs, delivery records."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()

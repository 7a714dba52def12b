"""The reconciler's webhook step: POST the due deliveries, at least once, with backoff.

Why the reconciler: its pass runs every few seconds on one process at a time (it holds
a lock), and the deliveries are queued in Redis in the step that drops an ended run from
the active set (``forget.lua``), so neither a crash of the process that ended the run nor
a receiver that is down loses one. Rejected: sending from the worker that finalizes (a
crash right after loses it; a cancel ends runs from a client), or a Celery task per
delivery (a task retried by Celery has no log a person can read, and a broker outage
between the run's end and the publish would lose it).

At least once: each attempt first pushes the delivery's due time past the attempt's
bound (should the lock change hands mid-attempt, the next holder does not send it too),
then POSTs, then records the attempt in the run's log and either drops the delivery
(a 2xx answer, or given up) or makes it due again after ``retry_delay_s``. A crash after
the receiver answered and before the record repeats the delivery: receivers deduplicate
on ``Dagwright-Delivery``.

Sends run in a thread of their own, one batch at a time, as trace exports do: a pass
runs on a worker's event loop, which a slow receiver must not hold up.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING

import httpx

from dagwright.egress import EgressPolicy
from dagwright.egress.transport import egress_client
from dagwright.errors import ConfigurationError, EgressRefusedError, UnknownRunError
from dagwright.models import Webhook
from dagwright.webhooks.payload import delivery_body
from dagwright.webhooks.records import Delivery, DeliveryAttempt, read_delivery, save_delivery
from dagwright.webhooks.signing import DELIVERY_HEADER, SIGNATURE_HEADER, signature_header

if TYPE_CHECKING:  # the reconciler passes its runtime in: webhooks sit below it
    from dagwright.orchestrator.runtime import Runtime

log = logging.getLogger(__name__)

DELIVERIES_PER_PASS = 50
EVENT_HEADER = "Dagwright-Event"
ERROR_MAX_CHARS = 300
NO_ANSWER = "no answer (why is in the sending worker's log)"
REFUSED = (
    "not sent: its host is, or resolves to, an address the egress filter refuses "
    "(DAGWRIGHT_EGRESS_ALLOW)"
)


def retry_delay_s(tries: int, backoff_s: float, backoff_max_s: float) -> float:
    """Delay before the next attempt after ``tries`` failed ones (1-based): doubling
    from ``backoff_s``, capped at ``backoff_max_s``."""
    return min(backoff_max_s, backoff_s * 2 ** max(tries - 1, 0))


def shown_error(exc: Exception) -> str:
    """What a delivery record says of an attempt that got no answer. Whoever can read
    the record may have aimed the webhook: a refused connection, a timeout and a dropped
    packet read the same (else the records would map a network's open ports), and only
    the sender's log has the detail. A missing secret variable is the deployment's
    own mistake, and is said."""
    if isinstance(exc, EgressRefusedError):
        return REFUSED
    if isinstance(exc, ConfigurationError):
        return f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]
    return NO_ANSWER


class WebhookSender:
    """Sends the due deliveries in a background batch (one at a time)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._batch: threading.Thread | None = None

    def send_due(self) -> int:
        """Start sending the due deliveries unless a batch is still at it; how many
        were due."""
        if self._batch is not None and self._batch.is_alive():
            return 0
        now = self.runtime.store.server_time_ms()
        due = self.runtime.client.zrangebyscore(
            self.runtime.keys.webhooks_due, "-inf", now, start=0, num=DELIVERIES_PER_PASS
        )
        if due:
            self._batch = threading.Thread(
                target=self._send_batch, args=(due,), name="dagwright-webhooks", daemon=True
            )
            self._batch.start()
        return len(due)

    def wait(self, timeout_s: float) -> None:
        """Wait for the batch under way, if any (for tests and a clean stop)."""
        if self._batch is not None:
            self._batch.join(timeout_s)

    def _send_batch(self, due: list[str]) -> None:
        settings = self.runtime.settings
        policy = EgressPolicy.from_settings(settings)
        with egress_client(policy, settings.webhooks.timeout_s) as http:
            for delivery_id in due:
                try:
                    self._send(http, delivery_id)
                except Exception:  # Redis gone: the deliveries stay due, a later pass sends
                    log.warning("sending webhooks stopped", exc_info=True)
                    return

    def _send(self, http: httpx.Client, delivery_id: str) -> None:
        client, keys = self.runtime.client, self.runtime.keys
        delivery = read_delivery(self.runtime, delivery_id)
        if delivery is None or delivery.state != "pending":  # expired, or done already
            client.zrem(keys.webhooks_due, delivery_id)
            return
        now = self.runtime.store.server_time_ms()
        settings = self.runtime.settings
        lease_ms = int((2 * settings.webhooks.timeout_s + settings.egress.resolve_timeout_s) * 1000)
        client.zadd(keys.webhooks_due, {delivery_id: now + lease_ms}, xx=True)
        try:
            attempt = self._attempt(http, delivery)
        except UnknownRunError:  # the run expired under it
            client.zrem(keys.webhooks_due, delivery_id)
            return
        self._record(delivery, attempt)

    def _attempt(self, http: httpx.Client, delivery: Delivery) -> DeliveryAttempt:
        number = len(delivery.attempts) + 1
        started_ms, clock = self.runtime.store.server_time_ms(), time.monotonic()
        hook = self._hook(delivery)
        body = delivery_body(
            delivery.id, delivery.event, self.runtime.store.read_state(delivery.run_id)
        )
        status_code, error = None, None
        try:
            headers = self._headers(hook, delivery, body)
            # streamed and never read: a receiver's body, however big or slow, holds nothing
            with http.stream("POST", hook.url, content=body, headers=headers) as answer:
                status_code = answer.status_code
        except (httpx.HTTPError, OSError, ConfigurationError, EgressRefusedError) as exc:
            error = shown_error(exc)
            log.info("webhook %s to %s: %s", delivery.id, delivery.url, exc)
        # How long a failure took would tell a closed port from a filtered one: not shown.
        duration_ms = round((time.monotonic() - clock) * 1000) if status_code else 0
        return DeliveryAttempt(
            attempt=number,
            at_ms=started_ms,
            duration_ms=duration_ms,
            status_code=status_code,
            error=error,
        )

    def _hook(self, delivery: Delivery) -> Webhook:
        raw = self.runtime.client.hget(
            self.runtime.keys.run_key(delivery.run_id, "run"), "webhooks"
        )
        if raw is None:
            raise UnknownRunError(f"run {delivery.run_id} not found (expired?)")
        return Webhook.model_validate(json.loads(raw)[delivery.hook])

    def _headers(self, hook: Webhook, delivery: Delivery, body: bytes) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "dagwright-webhooks",
            DELIVERY_HEADER: delivery.id,
            EVENT_HEADER: delivery.event,
        }
        secret = self._secret(hook)
        if secret:
            headers[SIGNATURE_HEADER] = signature_header(secret, int(time.time()), body)
        return headers

    def _secret(self, hook: Webhook) -> str | None:
        """The signing key: from the environment variable the hook names, else the
        global ``webhook_secret``; read here, at send time, never stored."""
        if hook.secret_env is None:
            secret = self.runtime.settings.webhooks.secret
            return secret.get_secret_value() if secret else None
        value = os.environ.get(hook.secret_env)
        if not value:
            raise ConfigurationError(f"{hook.secret_env} is not set on this worker")
        return value

    def _record(self, delivery: Delivery, attempt: DeliveryAttempt) -> None:
        settings = self.runtime.settings
        attempts = [*delivery.attempts, attempt]
        tries = len(attempts) - delivery.round_start
        age_s = (attempt.at_ms - delivery.queued_ms) / 1000
        gave_up = tries >= settings.webhooks.max_attempts or age_s >= settings.webhooks.max_age_s
        state = "delivered" if attempt.ok else ("failed" if gave_up else "pending")
        save_delivery(
            self.runtime, delivery.model_copy(update={"attempts": attempts, "state": state})
        )
        key = self.runtime.keys.webhooks_due
        if state != "pending":
            self.runtime.client.zrem(key, delivery.id)
            self._log_outcome(delivery, attempt, state)
            return
        delay_ms = int(
            retry_delay_s(tries, settings.webhooks.backoff_s, settings.webhooks.backoff_max_s)
            * 1000
        )
        self.runtime.client.zadd(key, {delivery.id: attempt.at_ms + delay_ms}, xx=True)

    def _log_outcome(self, delivery: Delivery, attempt: DeliveryAttempt, state: str) -> None:
        url = delivery.url  # shown: its user information masked
        if state == "delivered":
            log.info("webhook %s delivered to %s", delivery.id, url)
        else:
            log.warning(
                "webhook %s to %s given up after attempt %d (%s)",
                delivery.id,
                url,
                attempt.attempt,
                attempt.error or attempt.status_code,
            )

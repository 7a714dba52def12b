"""``client.webhooks``: a run's webhook deliveries, listed and sent again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from dagwright.client.redis_errors import SubClient
from dagwright.errors import InputError
from dagwright.models import Webhook
from dagwright.webhooks.records import Delivery, list_deliveries, redeliver


class WebhookClient(SubClient):
    """What a run's webhooks were sent, and sending them again (``client.webhooks``)."""

    def deliveries(self, run_id: str) -> list[Delivery]:
        """Every delivery of the run, each with its attempts (answer or error, duration)."""
        return list_deliveries(self._client.runtime, run_id)

    def redeliver(self, run_id: str, delivery_id: str | None = None) -> list[Delivery]:
        """Queue the run's deliveries (or the one named) again, due now, with a fresh
        number of attempts; the reconciler sends them at its next pass."""
        return redeliver(self._client.runtime, run_id, delivery_id)


def coerce_webhooks(webhooks: Sequence[Webhook | dict[str, Any] | str]) -> list[Webhook]:
    """Webhooks from what a caller gives: models, their dicts, or bare URLs (every run
    end, the global secret). InputError naming the first bad one."""
    hooks = []
    for given in webhooks:
        if isinstance(given, Webhook):
            hooks.append(given)
            continue
        try:
            hooks.append(
                Webhook.model_validate({"url": given} if isinstance(given, str) else given)
            )
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise InputError(f"webhook {given!r}: {where}: {problem['msg']}") from None
    return hooks

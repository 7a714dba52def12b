"""A run's webhook delivery log: one record per delivery, with every attempt.

A record is created by ``forget.lua`` when the run ends (the hash ``keys.webhook_log``,
field = delivery id, with its id in ``keys.webhooks_due``); the sender appends its
attempts; ``redeliver`` queues it again. Records hold the URL (user information masked),
never a secret.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.errors import InputError
from dagwright.webhooks.urls import shown_url

if TYPE_CHECKING:  # the reconciler and the client pass their runtime in
    from dagwright.orchestrator.runtime import Runtime

DeliveryState = Literal["pending", "delivered", "failed"]


class DeliveryAttempt(BaseModel):
    """One POST of a delivery: its answer (``status_code``) or why none came (``error``)."""

    model_config = ConfigDict(frozen=True)

    attempt: int
    at_ms: int
    duration_ms: int  # 0 when nothing answered: how long would tell closed from filtered
    status_code: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class Delivery(BaseModel):
    """One run end told to one webhook (``id`` is the ``Dagwright-Delivery`` header)."""

    model_config = ConfigDict(frozen=True)

    id: str
    run_id: str
    hook: int  # index in the run's webhooks
    url: str
    """Where it goes, as shown: a user name or password masked (a run from before such
    URLs were refused may hold one; the sender reads the run's own webhook)."""
    event: str  # run.succeeded | run.failed | run.cancelled
    state: DeliveryState = "pending"
    queued_ms: int  # when it was (last) queued: its max age counts from here
    round_start: int = 0  # attempts before the last redeliver (not counted again)
    attempts: list[DeliveryAttempt] = Field(default_factory=list)

    @field_validator("url")
    @classmethod
    def _masked(cls, url: str) -> str:
        return shown_url(url)

    @property
    def tries_this_round(self) -> int:
        return len(self.attempts) - self.round_start


def run_id_of(delivery_id: str) -> str:
    """The run a delivery id names (``<run>.<finished_at>.<n>``)."""
    return delivery_id.rsplit(".", 2)[0]


def read_delivery(runtime: Runtime, delivery_id: str) -> Delivery | None:
    raw = runtime.client.hget(runtime.keys.webhook_log(run_id_of(delivery_id)), delivery_id)
    return None if raw is None else Delivery.model_validate_json(raw)


def save_delivery(runtime: Runtime, delivery: Delivery) -> None:
    """Write the record back. Should the log have expired meanwhile (with its run), the
    write makes it again, and it expires as the run's keys do."""
    key = runtime.keys.webhook_log(delivery.run_id)
    pipe = runtime.client.pipeline(transaction=True)
    pipe.hset(key, delivery.id, delivery.model_dump_json())
    pipe.expire(key, runtime.settings.retention.retention_s, nx=True)
    pipe.execute()


def list_deliveries(runtime: Runtime, run_id: str) -> list[Delivery]:
    """Every delivery of the run, oldest end first (UnknownRunError if no such run)."""
    runtime.store.run_status(run_id)
    raw = runtime.client.hgetall(runtime.keys.webhook_log(run_id))
    found = [Delivery.model_validate_json(value) for value in raw.values()]
    return sorted(found, key=lambda d: (d.queued_ms, d.hook))


def redeliver(runtime: Runtime, run_id: str, delivery_id: str | None = None) -> list[Delivery]:
    """Queue the run's deliveries (or the one named) again, due now, with a fresh
    attempt budget; the ones queued. InputError if the run has no such delivery."""
    chosen = [d for d in list_deliveries(runtime, run_id) if delivery_id in (None, d.id)]
    if not chosen:
        what = f"no delivery {delivery_id}" if delivery_id else "no webhook delivery"
        raise InputError(f"run {run_id} has {what}; `dagwright webhooks list {run_id}` lists them")
    now = runtime.store.server_time_ms()
    queued = [
        d.model_copy(update={"state": "pending", "queued_ms": now, "round_start": len(d.attempts)})
        for d in chosen
    ]
    # The log (the run's Cluster slot) before the queue (its own): a crash in between
    # leaves records pending that a repeat of the command queues.
    log_key = runtime.keys.webhook_log(run_id)
    runtime.client.hset(log_key, mapping={d.id: d.model_dump_json() for d in queued})
    runtime.client.zadd(runtime.keys.webhooks_due, dict.fromkeys((d.id for d in queued), now))
    return queued


__all__ = [
    "Delivery",
    "DeliveryAttempt",
    "list_deliveries",
    "read_delivery",
    "redeliver",
    "save_delivery",
]

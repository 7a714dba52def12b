"""The team's own Celery app (``DAGWRIGHT_CELERY_APP``), as ``celery_task`` nodes use it:
``TeamApp`` of ``workers/team_tasks.py`` over Celery.

dagwright never sends through its own app here, nor uses the team's for anything else:
the team's broker, routing (``task_routes``, a task's ``queue``) and result backend are
the team's. The app is checked once, when first used: it must have a result backend
(the only place a task's outcome is read) and be JSON-only, both ways (a pickled result
is code execution for anyone who can write to its backend). A failure's class name and
message are read from the stored result as data: no exception is rebuilt (which would
import the module the result names) and no traceback is kept.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.backends.base import BaseKeyValueStoreBackend, DisabledBackend

from dagwright.errors import TeamAppError
from dagwright.settings import Settings
from dagwright.workers.team_tasks import FAILURE, REVOKED, TaskOutcome

JSON_CONTENT = frozenset({"json", "application/json"})
OUTCOME_BATCH = 500  # results read per MGET
MAX_CLASS_CHARS = 200
MAX_MESSAGE_CHARS = 2_000
RESULT_ENVELOPE_BYTES = 64 * 1024  # status, task id, date_done... around the result


class CeleryTeamApp:
    """The team's app, checked fit for ``celery_task`` nodes."""

    def __init__(self, app: Celery, path: str, max_result_bytes: int) -> None:
        self.app = app
        self.path = path
        self.max_result_bytes = max_result_bytes  # checked before a stored result is parsed
        refuse_unfit(app, path)

    def send(self, name: str, kwargs: dict[str, Any], task_id: str) -> None:
        self.app.send_task(name, kwargs=kwargs, task_id=task_id)

    def outcomes(self, task_ids: list[str]) -> dict[str, TaskOutcome]:
        backend = self.app.backend
        if not isinstance(backend, BaseKeyValueStoreBackend):
            return {task_id: meta_outcome(backend.get_task_meta(task_id)) for task_id in task_ids}
        found: dict[str, TaskOutcome] = {}
        for start in range(0, len(task_ids), OUTCOME_BATCH):
            batch = task_ids[start : start + OUTCOME_BATCH]
            values = backend.mget([backend.get_key_for_task(task_id) for task_id in batch])
            for task_id, value in zip(batch, values, strict=True):
                found[task_id] = self._read(backend, value)
        return found

    def _read(self, backend: BaseKeyValueStoreBackend, value: bytes | str | None) -> TaskOutcome:
        """A stored result, refused unparsed when it is larger than a node's output may be
        (with its envelope: the result alone is checked again when it is recorded)."""
        if value is not None and len(value) > self.max_result_bytes + RESULT_ENVELOPE_BYTES:
            return failed(
                FAILURE,
                "ResultTooLargeError",
                f"the task's stored result is {len(value):,} bytes; a node's output may be "
                f"{self.max_result_bytes:,} (DAGWRIGHT_MAX_OUTPUT_BYTES)",
            )
        return stored_outcome(backend.decode(value))

    def revoke(self, task_ids: list[str]) -> None:
        # terminate: a task already running is stopped too (prefork pools; others can
        # only drop the tasks they have not started).
        self.app.control.revoke(task_ids, terminate=True)


def refuse_unfit(app: Celery, path: str) -> None:
    """TeamAppError unless ``app`` has a result backend and speaks JSON only."""
    conf = app.conf
    if not conf.result_backend or isinstance(app.backend, DisabledBackend):
        raise TeamAppError(
            f"the Celery app {path} has no result backend: celery_task nodes read their "
            "tasks' results from it; set result_backend (e.g. redis://...) in that app"
        )
    accepted = {*conf.accept_content, *(conf.result_accept_content or conf.accept_content)}
    serializers = {conf.task_serializer, conf.result_serializer}
    if serializers != {"json"} or not accepted <= JSON_CONTENT:
        raise TeamAppError(
            f"the Celery app {path} is not JSON-only (task_serializer "
            f"{conf.task_serializer!r}, result_serializer {conf.result_serializer!r}, "
            f"accept_content {sorted(accepted)}): celery_task nodes refuse pickle and every "
            "other serializer; set all three to json"
        )


def stored_outcome(meta: dict[str, Any] | None) -> TaskOutcome:
    """The outcome a key-value backend stored (None: nothing yet, Celery's PENDING)."""
    if meta is None:
        return TaskOutcome(state="PENDING")
    state, result = str(meta.get("status", "PENDING")), meta.get("result")
    if state in (FAILURE, REVOKED) and isinstance(result, dict):
        message = result.get("exc_message", "")
        if isinstance(message, list | tuple):
            message = ", ".join(str(part) for part in message)
        return failed(state, str(result.get("exc_type", "")), str(message))
    return TaskOutcome(state=state, result=result if state == "SUCCESS" else None)


def meta_outcome(meta: dict[str, Any]) -> TaskOutcome:
    """The outcome another backend returned (a failure's result is an exception there)."""
    state, result = str(meta.get("status", "PENDING")), meta.get("result")
    if isinstance(result, BaseException):
        return failed(state, type(result).__name__, str(result))
    return TaskOutcome(state=state, result=result if state == "SUCCESS" else None)


def failed(state: str, error_class: str, message: str) -> TaskOutcome:
    """A failure, its class name and message bounded: they come from the team's side."""
    return TaskOutcome(
        state=state, error_class=error_class[:MAX_CLASS_CHARS], message=message[:MAX_MESSAGE_CHARS]
    )


@functools.cache
def team_app(path: str, max_result_bytes: int) -> CeleryTeamApp:
    """The app at ``module:attribute``, imported and checked once per process."""
    module_name, _, attribute = path.partition(":")
    try:
        app = functools.reduce(getattr, attribute.split("."), importlib.import_module(module_name))
    except Exception as exc:
        raise TeamAppError(
            f"cannot import the Celery app {path} (DAGWRIGHT_CELERY_APP): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(app, Celery):
        raise TeamAppError(f"{path} (DAGWRIGHT_CELERY_APP) is not a Celery app")
    return CeleryTeamApp(app, path, max_result_bytes)


def team_app_factory(settings: Settings) -> Callable[[], CeleryTeamApp] | None:
    """What builds the team's app on first use, if one is configured."""
    if settings.celery.app is None:
        return None
    return functools.partial(team_app, settings.celery.app, settings.limits.max_output_bytes)

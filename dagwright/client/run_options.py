"""What a submit may say besides its plan (``RunOptions``), the check that refuses
anything else at run time, and ``build_run_request``: the keyword options as the one
``RunRequest`` every door submits (orchestrator/control/run_request.py).

``**options: Unpack[RunOptions]`` is a promise mypy keeps, not Python: without this check
``submit(plan, timeout=2)`` (meant ``timeout_s``) ran with no limit, and Celery's
``eta=``, ``countdown=`` were accepted and ignored. An unknown keyword is
refused as Python refuses one (a ``TypeError``, in its wording) with the nearest valid
name, or, for a Celery word, what dagwright offers instead; a scalar option of the wrong
type (``llm_batch="false"``, which is truthy) is refused too. Containers (lists, dicts, a
Budget) are left to the checks that read them, which name what is wrong inside.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, TypedDict, Union, get_args, get_origin, get_type_hints

from pydantic import ValidationError

from dagwright.errors import InputError, RunOptionError
from dagwright.models import Budget, Plan, Webhook
from dagwright.orchestrator.control.run_request import RunRequest


class RunOptions(TypedDict, total=False):
    """What a submit may say besides its plan and idempotency key: ``Client.submit``
    documents each; ``AsyncClient.submit`` takes the same."""

    goal: str | None
    context: str
    worker_types: list[str] | None
    max_nodes: int | None
    max_depth: int | None
    replan: bool | None
    budget: Budget | dict[str, Any] | None
    budget_tokens: int | None
    max_concurrent_nodes: int | None
    timeout_s: float | None
    response_cache: bool | None
    priority: int | None
    llm_batch: bool
    inputs: dict[str, Any] | None
    webhooks: Sequence[Webhook | dict[str, Any] | str]
    not_before: datetime | str | None
    countdown_s: float | None
    memory: str | None


RUN_OPTION_NAMES = frozenset(RunOptions.__annotations__)

NO_ROUTING = "a node goes to its worker type's queue; a run has no queue or route of its own"
CELERY_WORDS = {
    "eta": "use not_before= (a datetime or ISO 8601 text): the run's roots start then",
    "countdown": "use countdown_s= (seconds): the run's roots start that much later",
    "expires": "a run does not expire before it starts; timeout_s limits its wall-clock time",
    "queue": NO_ROUTING,
    "routing_key": NO_ROUTING,
    "exchange": NO_ROUTING,
    "link": "webhooks= are told when the run ends, or a node with run_if runs after others",
    "link_error": "webhooks= are told when the run fails, or a run_if: any_failed node runs",
    "retry": "retries are per node: the plan's retry: field",
    "retry_policy": "retries are per node: the plan's retry: field",
    "max_retries": "retries are per node: the plan's retry: field",
    "time_limit": "timeout_s is the run's wall-clock limit (a node's own is its timeout_s)",
    "soft_time_limit": "timeout_s is the run's wall-clock limit (a node's own is its timeout_s)",
    "task_id": "dagwright names the run; idempotency_key makes a repeat return the same run",
    "args": "inputs= are the run's arguments",
    "kwargs": "inputs= are the run's arguments",
}
"""Celery's ``apply_async`` words with no dagwright meaning: what to use instead."""


def build_run_request(
    caller: str,
    plan: Plan | dict[str, Any] | str | Path | None,
    options: Mapping[str, Any],
    *,
    max_plan_file_bytes: int,
) -> RunRequest:
    """The RunRequest of a submit's plan (a Plan, its dict, or a plan file's path) and
    keyword ``options``: unknown or mistyped options refused as ``caller``'s
    (RunOptionError), the plan read, the budget (``budget_tokens`` is short for its
    ``max_total_tokens``) and webhooks coerced, then every bound checked (InputError)."""
    from dagwright.client.webhooks import coerce_webhooks
    from dagwright.planning.goals import requested_budget
    from dagwright.plans.files import coerce_plan

    check_run_options(caller, options)
    given = {name: value for name, value in options.items() if name != "budget_tokens"}
    given["budget"] = requested_budget(options.get("budget"), options.get("budget_tokens"))
    given["webhooks"] = tuple(coerce_webhooks(options.get("webhooks", ())))
    if given.get("llm_batch") is None:
        given["llm_batch"] = False
    if given.get("worker_types") is not None:
        given["worker_types"] = tuple(given["worker_types"])
    if plan is not None:
        given["plan"] = coerce_plan(plan, max_file_bytes=max_plan_file_bytes)
    try:
        return RunRequest(**given)
    except ValidationError as exc:  # a container of the wrong shape: say which, one line
        problems = (f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(f"invalid run request: {'; '.join(problems)}") from None


MAX_OTHERS_SHOWN = 5  # unknown names listed after the first
MAX_NAME_SHOWN = 64  # characters of a name shown


def check_run_options(caller: str, options: Mapping[str, Any]) -> None:
    """Refuse ``options`` given to ``caller`` (``"Client.submit"``) that RunOptions does
    not name, or a scalar one of the wrong type: RunOptionError (a TypeError and an
    InputError), one line."""
    unknown = [name for name in options if name not in RUN_OPTION_NAMES]
    if unknown:
        raise RunOptionError(unknown_keyword_line(caller, unknown, RUN_OPTION_NAMES))
    for name, value in options.items():
        expected = scalar_types(name)
        if expected and not fits(value, expected):
            raise RunOptionError(wrong_type_line(caller, name, value, expected))


def unknown_keyword_line(caller: str, unknown: Sequence[str], valid: Collection[str]) -> str:
    """Python's line for an unknown keyword, with what to write instead."""
    return f"{caller}() got an unexpected keyword argument {hinted(unknown, valid)}"


def hinted(unknown: Sequence[str], valid: Collection[str]) -> str:
    """The first unknown name with its hint, then the others': ``'timeout'; did you mean
    'timeout_s'? (and 'eta')``. Bounded: an API body may hold any number of any names."""
    first, others = unknown[0], unknown[1:]
    line = f"{shown_name(first)}{option_hint(first, valid)}"
    if others:
        names = [shown_name(name) for name in others[:MAX_OTHERS_SHOWN]]
        if len(others) > MAX_OTHERS_SHOWN:
            names.append(f"{len(others) - MAX_OTHERS_SHOWN} more")
        line += f" (and {', '.join(names)})"
    return line


def shown_name(name: str) -> str:
    return repr(name if len(name) <= MAX_NAME_SHOWN else name[:MAX_NAME_SHOWN] + "...")


def option_hint(name: str, valid: Collection[str]) -> str:
    """``"; did you mean 'timeout_s'?"``, Celery's word's alternative, or nothing."""
    if name in CELERY_WORDS:
        return f"; {CELERY_WORDS[name]}"
    nearest = difflib.get_close_matches(name, sorted(valid), n=1)
    return f"; did you mean {nearest[0]!r}?" if nearest else ""


@cache
def scalar_types(name: str) -> tuple[type, ...]:
    """The classes option ``name`` may be when its type is made of bool, int, float, str
    and None only; empty for anything else, which is not checked here."""
    hint = get_type_hints(RunOptions)[name]
    members = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    if not all(member in (bool, int, float, str, type(None)) for member in members):
        return ()
    return members


def fits(value: Any, expected: tuple[type, ...]) -> bool:
    """``isinstance``, except that a bool is not a number here (``max_nodes=True``) and an
    int is a float (``timeout_s=30``)."""
    if isinstance(value, bool):
        return bool in expected
    if isinstance(value, int) and float in expected:
        return True
    return isinstance(value, expected)


def wrong_type_line(caller: str, name: str, value: Any, expected: tuple[type, ...]) -> str:
    """Python's line for an argument of the wrong type (``int()``'s wording)."""
    names = dict.fromkeys("None" if kind is type(None) else kind.__name__ for kind in expected)
    return f"{caller}() argument {name!r} must be {' or '.join(names)}, not {type(value).__name__}"

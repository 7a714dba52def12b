"""``RunRequest``: what a submit asks for, as one frozen type from the edge to the Lua call.

Every door builds it: ``Client.submit``/``AsyncClient.submit`` (from their keyword options,
``client/run_options.py`` ``build_run_request``), the HTTP API's submit body, the MCP
server's ``submit_run``, ``dagwright run``'s flags, a schedule's tick and a follow-up
(``Schedule.run_request``). It is validated once, when it is made: the bounds that need
nothing but the request itself (a plan or a goal, goal options on a plan, the run's
concurrency, timeout, priority, memory namespace, webhook count) are checked here and
nowhere else, each refusal an InputError of one line. What needs the deployment (the
plan against the registry, inputs against the plan's schema, webhook URLs against the
egress filter, a start delay against ``max_start_delay_s``) is checked by ``prepare_run``
(control/submission.py), which also turns the request into the run hash's fields: the one
place a request becomes what lua/create_run.lua is given.

Rejected: the ``dict[str, Any]`` that ``Client.run_request`` returned and ``start_run``
took as 16 keywords: each door re-shaped it (the CLI checked the run timeout itself, the
HTTP body and the MCP tool each listed the options), and a new option meant six edits.
Rejected too: validating with pydantic's own errors (``Field(ge=1)``): their wording
differs from the one-line InputErrors callers and tests read, and an InputError raised
in a validator leaves pydantic as it is, so the lines stay the same.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from dagwright.errors import InputError, RunInputError
from dagwright.memory.namespaces import checked_name
from dagwright.models import (
    DEFAULT_PRIORITY,
    MAX_DURATION_S,
    MAX_PRIORITY,
    MAX_WEBHOOKS,
    MIN_PRIORITY,
    Budget,
    Plan,
    Webhook,
)

if TYPE_CHECKING:
    from dagwright.planning.goals import GoalOptions

GOAL_ONLY = ("context", "worker_types", "max_nodes", "max_depth", "replan")
"""The options only a goal uses (its planner's); a budget applies to plans too."""


class RunRequest(BaseModel):
    """A run to start: a plan, or a goal for the planner, and how to run it.

    ``Client.submit`` documents each option; ``memory`` names the memory namespace the
    run's agents use (it wins over the plan's ``memory:``; none: the agent type's, the
    schedule's or the run's own, ``memory/namespaces.py``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    plan: Plan | None = None
    goal: str | None = None
    context: str = ""
    worker_types: tuple[str, ...] | None = None
    max_nodes: int | None = None
    max_depth: int | None = None
    replan: bool | None = None
    budget: Budget | None = None
    max_concurrent_nodes: int | None = None
    timeout_s: float | None = None
    response_cache: bool | None = None
    priority: int | None = None
    llm_batch: bool = False
    memory: str | None = None
    inputs: dict[str, Any] | None = None
    webhooks: tuple[Webhook, ...] = ()
    not_before: datetime | str | None = None
    countdown_s: float | None = None

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs_mapping(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            found = type(value).__name__
            raise RunInputError([f"inputs are a mapping of names to values, not {found}"])
        return value

    @field_validator("not_before", mode="before")
    @classmethod
    def _moment(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, datetime | str):
            raise InputError(
                f"not_before is a datetime or ISO 8601 text, not {type(value).__name__}"
            )
        return value

    @field_validator("countdown_s", mode="before")
    @classmethod
    def _countdown(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InputError(f"countdown_s is a number of seconds, not {type(value).__name__}")
        return value

    @field_validator("max_concurrent_nodes")
    @classmethod
    def _concurrency(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise InputError(f"max_concurrent_nodes must be at least 1, not {value}")
        return value

    @field_validator("timeout_s")
    @classmethod
    def _timeout(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and 0 < value <= MAX_DURATION_S):
            raise InputError(
                "the run timeout must be a positive number of seconds, at most "
                f"{MAX_DURATION_S:.0f}, not {value}"
            )
        return value

    @field_validator("priority")
    @classmethod
    def _priority(cls, value: int | None) -> int | None:
        if value is not None and not MIN_PRIORITY <= value <= MAX_PRIORITY:
            raise InputError(
                f"the priority must be {MIN_PRIORITY} to {MAX_PRIORITY} (higher first), not {value}"
            )
        return value

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        return checked_name(value, derived=False) if value is not None else None

    @model_validator(mode="after")
    def _plan_or_goal(self) -> RunRequest:
        if (self.plan is None) == (self.goal is None):
            raise InputError("give either a plan or a goal")
        misplaced = self.goal_only()
        if self.plan is not None and misplaced:
            raise InputError(f"{', '.join(misplaced)} apply to a goal, not to a plan")
        hooks = len(self.plan.webhooks if self.plan else ()) + len(self.webhooks)
        if hooks > MAX_WEBHOOKS:
            raise InputError(
                f"a run may have at most {MAX_WEBHOOKS} webhooks, its plan's and its submit's "
                f"together; this one would have {hooks}"
            )
        return self

    def goal_only(self) -> list[str]:
        """The names of the options set that only a goal uses."""
        return [name for name in GOAL_ONLY if getattr(self, name) not in (None, "", ())]

    def goal_options(self) -> GoalOptions:
        """How a goal is planned (the budget applies to plans too)."""
        from dagwright.planning.goals import GoalOptions  # the planner: loaded when used

        return GoalOptions(
            context=self.context,
            worker_types=list(self.worker_types) if self.worker_types is not None else None,
            max_nodes=self.max_nodes,
            max_depth=self.max_depth,
            replan=self.replan,
            budget=self.budget,
        )

    def run_timeout_s(self) -> float | None:
        """The run's wall-clock limit: the one asked for, else the plan's."""
        if self.timeout_s is None and self.plan is not None:
            return self.plan.timeout_s
        return self.timeout_s

    def run_priority(self) -> int:
        """The run's priority: the one asked for, else the plan's, else the default."""
        if self.priority is not None:
            return self.priority
        if self.plan is not None and self.plan.priority is not None:
            return self.plan.priority
        return DEFAULT_PRIORITY

    def uses_response_cache(self) -> bool:
        """Whether the run's agents use the response cache: as asked, else the plan's."""
        if self.response_cache is not None:
            return self.response_cache
        return self.plan is not None and self.plan.response_cache

    def memory_namespace(self) -> str | None:
        """The namespace the run names: the submit's, else the plan's (decision 89)."""
        if self.memory is not None:
            return self.memory
        return self.plan.memory if self.plan is not None else None

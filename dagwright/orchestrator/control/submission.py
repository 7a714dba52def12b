"""Starting a run, of a plan or of a goal: what the client and the schedules share.

A run is asked for as one ``RunRequest`` (control/run_request.py), already validated;
``prepare_run`` checks it against the deployment and ``request_fields`` turns it into the
run hash that lua/create_run.lua writes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from dagwright.egress import EgressPolicy
from dagwright.errors import ConfigurationError, IdempotencyConflictError
from dagwright.llm.model_lifecycle import warn_of_end_of_life
from dagwright.memory.namespaces import MEMORY_FIELD, checked_name
from dagwright.models import DEFAULT_PRIORITY, Budget, Plan, RunStatus, Webhook
from dagwright.orchestrator.broker import Broker
from dagwright.orchestrator.control.live_registry import registry_for_plan
from dagwright.orchestrator.control.pulling import dispatch_roots
from dagwright.orchestrator.control.run_gates import RunGates, key_fields
from dagwright.orchestrator.control.run_request import RunRequest
from dagwright.orchestrator.control.runnable import LiveCapabilities, needs_of_goal, needs_of_plan
from dagwright.orchestrator.control.start_times import start_fields
from dagwright.orchestrator.runstate.creation import (
    PRIORITY_FIELD,
    RUN_INPUTS_FIELD,
    Creation,
    KeyClaim,
    NewRun,
)
from dagwright.orchestrator.runstate.machine import ReadyNode
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.planning.goals import plan_request, planner_graph
from dagwright.plans.concurrency_keys import with_rendered_node_keys
from dagwright.plans.priced_models import (
    check_usd_budget_is_priced,
    models_of_goal,
    models_of_plan,
)
from dagwright.plans.run_inputs import bind_inputs, check_inputs, declared_names
from dagwright.plans.sizes import SizeLimits
from dagwright.plans.validation import PlanGraph, PlanLimits, validate_plan
from dagwright.settings import Settings
from dagwright.webhooks.urls import check_webhooks
from dagwright.workers import WorkerRegistry
from dagwright.workers.budgets import run_fields
from dagwright.workers.capabilities import llm_assignment


def check_plan(plan: Plan, settings: Settings, registry: WorkerRegistry) -> PlanGraph:
    """Validate a plan against the registered worker types and the limits, without Redis."""
    limits = PlanLimits(
        max_nodes=settings.limits.max_nodes,
        max_timeout_s=settings.limits.max_timeout_s,
        sizes=SizeLimits.of(settings),
        max_map_items=settings.limits.map_max_items,
    )
    return validate_plan(plan, registry, limits)


def run_budget(plan: Plan | None, budget: Budget | None) -> Budget | None:
    """A run's budget: the plan's, with each limit the submit sets overriding it."""
    merged = Budget().overridden_by(plan.budget if plan else None).overridden_by(budget)
    return merged if merged.is_set else None


def start_run(
    runtime: Runtime,
    broker: Broker,
    request: RunRequest,
    *,
    extra: dict[str, str | int] | None = None,
    idempotency_key: str | None = None,
    live_workers: LiveCapabilities | None = None,
    run_id: str | None = None,
) -> str:
    """Write a new run of ``request`` and publish its first nodes; its id (``run_id`` if
    given, else a new one; another if an idempotency key names an earlier run). PlanError
    (with every problem) or InputError before anything is written. ``extra``: more fields
    of the run's hash (a schedule's name, a follow-up's depth). With ``idempotency_key``, a
    submit repeated within ``idempotency_ttl_s`` (a retry after a timeout) returns the
    run the first one started, if it asks for the same (else IdempotencyConflictError).
    Given ``live_workers``, UnrunnablePlanError if workers are live and none can run some
    node (a scheduled run is not checked: nobody is there to read the refusal).

    What each option of the request does: ``max_concurrent_nodes``
    (orchestrator/execution/limits.py), ``timeout_s`` (enforced by the reconciler),
    ``response_cache`` (read back by claim.lua with each node), ``llm_batch``
    (``llm/batches.py``), ``memory`` (``memory/namespaces.py``), ``inputs`` (checked
    against the plan's ``inputs:`` schema and put in its ``{{ inputs.… }}`` templates before
    the plan is validated; a goal's are handed to its planner), ``webhooks``
    (dagwright/webhooks/), ``priority`` (a node's own wins), ``not_before`` /
    ``countdown_s`` (control/start_times.py)."""
    new_run = prepare_run(runtime, request, extra=extra, live_workers=live_workers)
    return write_run(runtime, broker, run_id or new_run_id(), new_run, idempotency_key)


def prepare_run(
    runtime: Runtime,
    request: RunRequest,
    *,
    extra: dict[str, str | int] | None = None,
    live_workers: LiveCapabilities | None = None,
) -> NewRun:
    """What ``start_run`` writes, checked (the same arguments, the same errors) and
    nothing written: the part a submit shares with ``AsyncClient``'s."""
    settings = runtime.settings
    plan, inputs = with_inputs(request.plan, request.inputs, settings.limits.max_params_bytes)
    budget = run_budget(plan, request.budget)
    fields = request_fields(request, plan, inputs, budget, settings)
    fields = {**(extra or {}), **fields}
    if plan is not None:
        plan = with_rendered_node_keys(plan, inputs, declared_names(plan.inputs))
    nodes_priority = request.run_priority()
    status = RunStatus.RUNNING
    output_nodes: list[str] | None = None
    registry = runtime.registry
    if request.goal is not None:  # checked first: a refused submit must not take its key
        options = request.goal_options()
        planned = plan_request(settings, runtime.registry, request.goal, options, inputs)
        replan = settings.planner.replan_enabled if options.replan is None else options.replan
        fields = {
            "request": planned.model_dump_json(),
            "replan_max": settings.planner.replan_max if replan else 0,
            **fields,
        }
        graph = planner_graph(planned, own_priority(nodes_priority))
        status, output_nodes = RunStatus.PLANNING, []
        models = models_of_goal(runtime.registry, settings, planned.worker_types)
        needs = needs_of_goal()
    else:
        assert plan is not None
        registry = registry_for_plan(plan, runtime.registry, live_workers)
        graph = check_plan(plan, settings, registry)
        models = models_of_plan(plan, registry, settings)
        needs = needs_of_plan(plan, registry)
    check_usd_budget_is_priced(budget, models, settings)
    warn_of_end_of_life(models.values(), settings)
    if live_workers is not None:
        live_workers.require(needs, settings.process.imports, llm_assignment(settings.llm))
    return NewRun.of(
        graph,
        lambda node: runtime.dispatch_for(node, nodes_priority, registry),
        status=status,
        output_nodes=output_nodes,
        extra=fields,
    )


def request_fields(
    request: RunRequest,
    plan: Plan | None,
    inputs: dict[str, Any],
    budget: Budget | None,
    settings: Settings,
) -> dict[str, str | int]:
    """The run hash's fields a request sets (lua/create_run.lua writes them as given):
    the one place a RunRequest becomes what the script is given. ``plan``: the request's
    with its inputs bound; ``inputs``: with their defaults. InputError for a webhook URL
    the egress filter refuses or a start past ``max_start_delay_s``."""
    fields: dict[str, str | int] = {}
    fields.update(inputs_fields(inputs))
    fields.update(run_fields(budget))
    fields.update(concurrency_fields(request.max_concurrent_nodes))
    if request.uses_response_cache():
        fields["response_cache"] = 1
    if request.llm_batch:
        fields["llm_batch"] = 1
    fields.update(memory_fields(request.memory_namespace()))
    hooks = [*(plan.webhooks if plan else ()), *request.webhooks]
    fields.update(webhook_fields(hooks, EgressPolicy.from_settings(settings)))
    fields.update(
        start_fields(request.not_before, request.countdown_s, settings.limits.max_start_delay_s)
    )
    if plan is not None:
        fields.update(key_fields(plan.concurrency, inputs, plan.inputs))
    run_timeout_s = request.run_timeout_s()
    if run_timeout_s is not None:
        fields["timeout_ms"] = round(run_timeout_s * 1000)
    if own_priority(request.run_priority()) is not None:
        fields[PRIORITY_FIELD] = request.run_priority()
    fields["teardown_timeout_ms"] = round(settings.limits.teardown_timeout_s * 1000)
    return fields


def write_run(
    runtime: Runtime, broker: Broker, run_id: str, new_run: NewRun, idempotency_key: str | None
) -> str:
    """Write a prepared run (unless its idempotency key names an earlier one) and publish
    its roots; the run the submit answers with."""
    if idempotency_key is None:
        creation = runtime.store.create_claimed_run(run_id, new_run)
    else:
        creation = IdempotencyKeys(runtime).create(idempotency_key, run_id, new_run)
    if creation.owner == run_id:
        publish_roots(runtime, broker, run_id, creation.ready, gated=creation.gated)
    return creation.owner


def publish_roots(
    runtime: Runtime, broker: Broker, run_id: str, ready: list[ReadyNode], *, gated: bool = False
) -> None:
    """Publish a new run's roots, or pool most of a run of many (``dispatch_roots``; a
    failed publish is the reconciler's to retry); a run ``gated`` by its concurrency key
    asks for a place first (else the reconciler does)."""
    try:
        dispatch_roots(runtime, broker, run_id, ready)
        if gated:
            RunGates(runtime, broker).admit(run_id)
    except ConfigurationError as exc:  # written: it goes out once the broker answers
        raise ConfigurationError(
            f"{exc}; run {run_id} is written, and its first nodes go out once it answers"
        ) from None


def with_inputs(
    plan: Plan | None, inputs: dict[str, Any] | None, max_bytes: int
) -> tuple[Plan | None, dict[str, Any]]:
    """The plan as it runs (its templates filled in) and the run's inputs (defaults
    included); a goal's inputs as given, for its planner."""
    if plan is None:
        return None, goal_inputs(inputs, max_bytes)
    bound = bind_inputs(plan, inputs, max_bytes)
    return bound.plan, bound.inputs


def inputs_fields(inputs: dict[str, Any]) -> dict[str, str | int]:
    """The run hash's field of the run's inputs (none without any); keys sorted, so the
    same inputs make the same request digest."""
    if not inputs:
        return {}
    return {RUN_INPUTS_FIELD: json.dumps(inputs, sort_keys=True, ensure_ascii=False)}


def goal_inputs(inputs: dict[str, Any] | None, max_bytes: int) -> dict[str, Any]:
    """A goal run's inputs: any mapping of JSON values (its planner's plan declares what
    it takes), within the size limit of params."""
    return check_inputs({"type": "object", "additionalProperties": True}, inputs, max_bytes)


def webhook_fields(hooks: Sequence[Webhook], egress: EgressPolicy) -> dict[str, str | int]:
    """The run hash's ``webhooks`` (the plan's, then the submit's: at most MAX_WEBHOOKS,
    RunRequest's check), read by forget.lua when the run ends; none: no field.
    InputError for a URL the egress filter refuses (webhooks/urls.py)."""
    if not hooks:
        return {}
    check_webhooks(hooks, egress)
    return {"webhooks": json.dumps([hook.model_dump(mode="json") for hook in hooks])}


def concurrency_fields(max_concurrent_nodes: int | None) -> dict[str, str | int]:
    """The run hash's field of a concurrency limit given at submit (none without one)."""
    return {} if max_concurrent_nodes is None else {"max_concurrent_nodes": max_concurrent_nodes}


def memory_fields(named: str | None) -> dict[str, str]:
    """The run hash's named memory namespace (none: the type's, the schedule's or the
    run's own, ``memory/namespaces.py``)."""
    return {MEMORY_FIELD: checked_name(named, derived=False)} if named else {}


def own_priority(priority: int) -> int | None:
    """A priority to write down: None for the default (a default run's request digest,
    and its planner node, stay what they were before priorities)."""
    return None if priority == DEFAULT_PRIORITY else priority


CLAIM_WAIT_S = 3.0  # for the run of a fresh claim to be written


class IdempotencyKeys:
    """Submits' idempotency keys: a key names the run the first submit with it started.

    The claim is taken just before the run is written (the key and the run are in
    different Redis Cluster slots: runstate/creation.py), so a key may name a run not yet
    written: that run is waited for a moment, and if it never appears (its submitter died
    in between) the key is taken over.

    A keyed run records a digest of what it was asked for (``request_digest``): a submit
    repeating the key with another plan or goal is refused (IdempotencyConflictError), as
    an HTTP API answers 409, rather than handed a run it did not ask for. A run written
    by an older client has no digest, and any repeat gets it as before.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def create(self, key: str, run_id: str, new_run: NewRun) -> Creation:
        """Write ``new_run`` as ``run_id`` if the key is free; else the run it names
        (IdempotencyConflictError if that run was asked for with another request)."""
        store = self.runtime.store
        digest = new_run.request_digest()
        keyed_run = new_run.with_request_digest()
        return self._settle(
            key,
            run_id,
            lambda claim: store.create_claimed_run(run_id, keyed_run, claim),
            digest,
        )

    def claim(self, key: str, run_id: str) -> str:
        """The key alone: ``run_id`` if the key is now its own, else the run it names."""
        store = self.runtime.store
        return self._settle(
            key, run_id, lambda claim: Creation(store.claim_key(claim, run_id), [])
        ).owner

    def _settle(
        self,
        key: str,
        run_id: str,
        attempt: Callable[[KeyClaim], Creation],
        digest: str = "",
    ) -> Creation:
        hashed_key = hashlib.sha256(key.encode()).hexdigest()
        claim = KeyClaim(
            self.runtime.keys.idempotency(hashed_key),
            self.runtime.settings.retention.idempotency_ttl_s,
        )
        creation = attempt(claim)
        if creation.owner == run_id:
            return creation
        asked = self._written_digest(creation.owner)
        if asked is None:  # its submitter died before writing it: take the key over
            return attempt(dataclasses.replace(claim, stale_owner=creation.owner))
        if digest and asked and asked != digest:
            raise IdempotencyConflictError(creation.owner)
        return creation

    def _written_digest(self, run_id: str) -> str | None:
        """The request digest of ``run_id`` once written ("" for none), None if it never
        appears within CLAIM_WAIT_S."""
        deadline = time.monotonic() + CLAIM_WAIT_S
        while (digest := self.runtime.store.request_digest(run_id)) is None:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
        return digest

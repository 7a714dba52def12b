"""The control plane: runs and their nodes as state in Redis, moved on by atomic Lua steps.

A map of the rooms, bottom to top (each may import the ones below it, never above;
``lint-imports`` holds it):

- ``runstate/``: the run state machine. ``machine.py`` (``RunStateMachine``: claim, complete,
  fail, retry, renew, cancel, reconcile, replay..., each one fenced Lua script of ``lua/``),
  ``store.py`` (``RunStore``: creating a run, reading snapshots and streams back, and what
  a re-plan reads, ``replan_reading.py``),
  ``scripts.py`` (the run scripts with their shared prelude).
- ``runtime.py`` (``Runtime``: everything one process needs to talk to the state store, built
  once from Settings), ``broker.py`` (the ``Broker`` protocol the orchestrator publishes
  through; Celery implements it in ``dagwright.tasks``), ``stop_signals.py`` (telling workers
  at once that a run was stopped).
- ``control/``: run control, what a person or a program asks for: ``submission.py`` (start a
  run of a plan or a goal), ``cancellation.py``, ``approvals.py`` (nodes waiting for a person
  and the decisions), ``dead_letter_replay.py`` (dead letters run again).
- ``execution/``: executing nodes on a worker: ``attempt.py`` (claim, run under a lease,
  record the outcome), ``leases.py`` (one renewal thread per process), ``limits.py``
  (concurrency slots), ``services.py`` (``NodeServices`` over Redis: what a running node may
  ask), ``backoff.py`` (retry delays), ``reconciler.py`` (what dead workers and lost messages
  left behind, re-queued), ``expansion.py`` (a planner's plan added to its run),
  ``replanning.py`` (a failed branch of a goal run re-planned).

Below it: plan validation (``dagwright.plans``) and the planner (``dagwright.planning``).
Above it: cron schedules (``dagwright.schedules``, which start runs through it). Beside it:
trace reads (``dagwright.telemetry``).
"""

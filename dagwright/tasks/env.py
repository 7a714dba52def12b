"""The per-process execution environment of a worker, built lazily after fork."""

from __future__ import annotations

import os

from dagwright.app import DagwrightCelery
from dagwright.orchestrator.execution.attempt import ExecutionEnv
from dagwright.orchestrator.execution.leases import LeaseKeeper
from dagwright.orchestrator.execution.limits import NodeLimits
from dagwright.orchestrator.execution.reconciler import Reconciler
from dagwright.orchestrator.execution.services import RedisNodeServices
from dagwright.orchestrator.runtime import Runtime
from dagwright.schedules.followups import followup_starter
from dagwright.tasks.publish import CeleryBroker
from dagwright.tasks.team_app import team_app_factory

_envs: dict[tuple[int, int], ExecutionEnv] = {}
_reconcilers: dict[tuple[int, int], Reconciler] = {}


def execution_env(app: DagwrightCelery) -> ExecutionEnv:
    """One environment per (app, process): connections and the lease thread do not
    survive fork(), so a prefork child builds its own on its first task."""
    key = (id(app), os.getpid())
    env = _envs.get(key)
    if env is None:
        settings = app.dagwright_settings
        runtime = Runtime.from_settings(settings)
        limits = NodeLimits.for_runtime(runtime)
        leases = LeaseKeeper(
            runtime.machine,
            lease_s=settings.dispatch.lease_s,
            interval_s=settings.dispatch.heartbeat_interval_s,
            renew_also=limits.renew_held,
        )
        broker = CeleryBroker(app)
        env = _envs[key] = ExecutionEnv(
            runtime=runtime,
            broker=broker,
            leases=leases,
            services=RedisNodeServices(
                runtime,
                team_app_factory(settings),
                followups=followup_starter(runtime, broker),
            ),
            limits=limits,
        )
    return env


def reconciler_for(app: DagwrightCelery) -> Reconciler:
    """One reconciler per (app, process), so its lock token stays the same across ticks."""
    key = (id(app), os.getpid())
    if key not in _reconcilers:
        env = execution_env(app)
        team_app = team_app_factory(env.runtime.settings)
        _reconcilers[key] = Reconciler(env.runtime, env.broker, team_app)
    return _reconcilers[key]

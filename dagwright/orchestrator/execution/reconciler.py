"""The reconciler: re-queues what dead workers and lost messages left behind, and stops
runs past their run timeout.

Any number of processes may run it (every worker does by default); they share the active
runs by bucket (buckets.py: each bucket leased by one reconciler at a time), and each
visits its buckets' runs pipelined, ``VISIT_BATCH`` runs a round trip, at most
``reconcile_max_runs_per_pass`` a pass. Every action is a fenced Lua transition, so even
two reconcilers on one run could not record anything twice.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

from dagwright.models import RunStatus
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.control.approvals import ApprovalBook
from dagwright.orchestrator.control.cancellation import stop_work
from dagwright.orchestrator.control.run_gates import RunGates
from dagwright.orchestrator.execution.backlog import PooledRecount
from dagwright.orchestrator.execution.bucket_backlog import PooledTotals
from dagwright.orchestrator.execution.buckets import CHORES_BUCKET, BucketLeases, bucket_of
from dagwright.orchestrator.execution.fairness import aged_node
from dagwright.orchestrator.execution.limits import NodeLimits, publish_waiters
from dagwright.orchestrator.execution.team_tasks import (
    TeamAppFactory,
    revoke_left_team_tasks,
    wake_ended_team_tasks,
)
from dagwright.orchestrator.runstate.machine import (
    LossBackoff,
    ReadyNode,
    ReconcilePass,
    ReconcileTerms,
    ended_run_keys,
)
from dagwright.orchestrator.runtime import Runtime
from dagwright.redis_scripts import is_cluster_client
from dagwright.telemetry.trace_export import TraceExport
from dagwright.webhooks.sender import WebhookSender

log = logging.getLogger(__name__)

ORPHAN_GRACE_MS = 60_000  # an active-set entry with no run yet may be a run being created
# Runs visited per round trip (a pipeline of reconcile.lua, one step per run): 10,000
# active runs are 50 round trips, and no pipeline holds more than this many replies.
VISIT_BATCH = 200
LEASE_INTERVALS = 3  # a bucket's lease: this many reconcile intervals


@dataclass
class ReconcileReport:
    ran: bool = False
    runs: int = 0
    requeued: int = 0
    republished: int = 0
    finished: list[str] = field(default_factory=list)
    exported: int = 0  # traces sent over OTLP
    webhooks_due: int = 0  # webhook deliveries handed to the sending thread
    team_tasks_ended: int = 0  # celery_task nodes woken: their team task ended
    buckets: list[int] = field(default_factory=list)  # the active-run buckets this one holds
    pooled_drift: dict[str, tuple[int, int]] = field(default_factory=dict)  # repaired counts


class Reconciler:
    def __init__(
        self, runtime: Runtime, broker: Broker, team_app: TeamAppFactory | None = None
    ) -> None:
        self.runtime = runtime
        self.broker = broker
        self.team_app = team_app  # None: no team Celery app here (no celery_task nodes)
        self.token = uuid.uuid4().hex
        self.limits = NodeLimits.for_runtime(runtime)
        self.gates = RunGates(runtime, broker)
        self._tidied_keys: set[str] = set()
        self.trace_export = TraceExport.for_runtime(runtime)
        self.webhooks = WebhookSender(runtime)
        settings = runtime.settings
        self.leases = BucketLeases(
            runtime.client,
            runtime.keys,
            self.token,
            buckets=settings.dispatch.reconciler_buckets,
            lease_ms=int(settings.dispatch.reconcile_interval_s * LEASE_INTERVALS * 1000),
        )
        self.recount = PooledRecount(runtime.client, runtime.keys)
        self._recounted_at = float("-inf")
        # On a Cluster the pooled nodes are counted per run, totalled here by bucket
        # (bucket_backlog.py), not by one counter (another slot than the runs').
        self._cluster = is_cluster_client(runtime.client)
        self.pooled_totals = PooledTotals(
            runtime.client,
            runtime.keys,
            buckets=settings.dispatch.reconciler_buckets,
            lease_ms=self.leases.lease_ms,
        )
        self._cursor = 0  # where the next pass starts among this one's runs, past the max

    def run_once(self) -> ReconcileReport:
        """One pass over the runs of the buckets this reconciler holds; the holder of
        bucket 0 also does the deployment's chores."""
        report = ReconcileReport()
        held = self.leases.refresh()
        if not held:
            return report
        report.ran = True
        report.buckets = sorted(held)
        chores = CHORES_BUCKET in held
        if chores:
            report.team_tasks_ended = self._watch_team_tasks()
        self._tidied_keys = set()  # concurrency keys whose ended runs were dropped
        mine = self._runs_of(held)
        self._visit(self._window(mine), report)
        if self._cluster:  # the ready backlog's pooled nodes, totalled by bucket
            self.pooled_totals.publish(held, mine)
        if chores:
            self._do_chores(report)
        return report

    def _runs_of(self, held: set[int]) -> list[str]:
        """The active runs of the ``held`` buckets."""
        buckets = self.runtime.settings.dispatch.reconciler_buckets
        active = self.runtime.client.sscan_iter(self.runtime.keys.active_runs, count=1000)
        return sorted(run_id for run_id in active if bucket_of(run_id, buckets) in held)

    def _window(self, mine: list[str]) -> list[str]:
        """At most ``reconcile_max_runs_per_pass`` of ``mine``: past it, a window that the
        next passes move on (so every run gets its turn)."""
        most = self.runtime.settings.dispatch.reconcile_max_runs_per_pass
        if len(mine) <= most:
            return mine
        start = self._cursor % len(mine)
        self._cursor = start + most
        return (mine[start:] + mine[:start])[:most]

    def _visit(self, run_ids: list[str], report: ReconcileReport) -> None:
        """Each run's pass, ``VISIT_BATCH`` runs a round trip; the leases renewed every
        third of a lease, and the runs of a bucket lost meanwhile left to its new holder."""
        if not run_ids:
            return
        terms = self._terms(self._empty_queues())
        renew_every_s = self.leases.lease_ms / 3000
        renewed_at = time.monotonic()
        buckets = self.runtime.settings.dispatch.reconciler_buckets
        for start in range(0, len(run_ids), VISIT_BATCH):
            batch = run_ids[start : start + VISIT_BATCH]
            if time.monotonic() - renewed_at > renew_every_s:
                held, renewed_at = self.leases.renew(), time.monotonic()
                batch = [run_id for run_id in batch if bucket_of(run_id, buckets) in held]
            passes = self.runtime.machine.reconcile_runs(batch, terms)
            if self._cluster:
                self.pooled_totals.read(batch)
            for run_id, found in zip(batch, passes, strict=True):
                report.runs += 1
                if isinstance(found, Exception):
                    log.warning("reconciler pass over run %s failed: %s", run_id, found)
                    continue
                self._reconcile_run(run_id, found, report)

    def _terms(self, empty_queues: list[str]) -> ReconcileTerms:
        settings = self.runtime.settings
        return ReconcileTerms(
            publish_grace_s=settings.dispatch.publish_grace_s,
            stranded_after_s=settings.dispatch.stranded_after_s,
            empty_queues=tuple(empty_queues),
            priority_aging_s=settings.dispatch.priority_aging_s,
            aging_limit=settings.dispatch.priority_aging_per_pass,
            loss_backoff=LossBackoff(
                settings.dispatch.worker_loss_backoff_s, settings.dispatch.worker_loss_backoff_max_s
            ),
        )

    def _do_chores(self, report: ReconcileReport) -> None:
        """What one reconciler does for the whole deployment (the holder of bucket 0)."""
        self._reject_overdue_approvals(report)
        self._trim_run_index()
        report.republished += self._wake_waiters()
        report.exported = self.trace_export.export_due()
        if report.exported:
            log.info("exported %d run trace(s) over OTLP", report.exported)
        report.webhooks_due = self.webhooks.send_due()
        report.pooled_drift = self._recount_pooled()

    def _recount_pooled(self) -> dict[str, tuple[int, int]]:
        """Every ``backlog_recount_interval_s``, the pooled-nodes counter put right (not
        on a Cluster, which keeps no such counter)."""
        every = self.runtime.settings.dispatch.backlog_recount_interval_s
        now = time.monotonic()
        if self._cluster or every <= 0 or now - self._recounted_at < every:
            return {}
        self._recounted_at = now
        drift = self.recount.run().drift
        if drift:
            log.warning("pooled-nodes counter repaired (queue: counted, found): %s", drift)
        return drift

    def _watch_team_tasks(self) -> int:
        """celery_task nodes: wake those whose team task ended (before the runs' pass,
        which then queues them), and revoke the team tasks of stopped runs."""
        if self.team_app is None:
            return 0
        try:
            app = self.team_app()
        except Exception:  # the app cannot be imported or is unfit: its nodes say why
            log.warning("the team's Celery app is unusable", exc_info=True)
            return 0
        revoke_left_team_tasks(self.runtime, app)
        return wake_ended_team_tasks(self.runtime, app)

    def _reject_overdue_approvals(self, report: ReconcileReport) -> None:
        """Approvals nobody decided within their timeout count as rejected."""
        ready = ApprovalBook(self.runtime).reject_overdue()
        if ready:
            log.info("rejected %d approval(s) nobody decided in time", len(ready))
            report.requeued += len(ready)
            dispatch(self.broker, self.runtime.machine, ready)

    def _wake_waiters(self) -> int:
        """Concurrency limits: free the slots of dead holders (not renewed), drop stale
        waiters and publish those that fit, so a crash never leaves waiters stuck."""
        waiters = self.limits.wake(self.limits.registered())
        return publish_waiters(self.runtime, self.broker, self.limits, waiters)

    def _empty_queues(self) -> list[str]:
        """The queues live workers consume that hold no message right now."""
        queues = self.runtime.live_worker_queues()
        return sorted(queue for queue in queues if self.broker.queue_depth(queue) == 0)

    def _trim_run_index(self) -> None:
        """Drop index entries of runs past retention (their keys have expired): from the
        run index (by creation), the ended runs' sets the metrics count (by end), and the
        replayed dead letters trimmed from the DLQ stream (``keys.dlq_settled``)."""
        settings, keys = self.runtime.settings, self.runtime.keys
        now_ms = self.runtime.store.server_time_ms()
        cutoff = now_ms - settings.retention.retention_s * 1000
        pipe = self.runtime.client.pipeline(transaction=False)
        pipe.zremrangebyscore(keys.run_index, "-inf", cutoff)
        for key in ended_run_keys(keys):
            pipe.zremrangebyscore(key, "-inf", cutoff)
        pipe.zremrangebyscore(
            keys.dlq_settled, "-inf", now_ms - settings.retention.dlq_retention_s * 1000
        )
        pipe.execute()

    def _reconcile_run(self, run_id: str, found: ReconcilePass, report: ReconcileReport) -> None:
        """Act on what a run's pass found: stop it, forget it, publish its nodes."""
        if found.timed_out is not None:
            log.warning("run %s ran past its run timeout (or teardown deadline): stopped", run_id)
            stop_work(self.runtime, self.broker, run_id, found.timed_out)
        if found.status not in (RunStatus.RUNNING.value, RunStatus.PLANNING.value):
            self._forget_if_over(run_id, found.status, report)
            return
        if self._age_out_if_too_old(run_id, found.age_ms, report):
            return
        if found.gated:  # waiting for its concurrency key: asked again each pass
            admission = self.gates.admit(run_id, self._tidied_keys)
            report.requeued += len(admission.ready) if admission else 0
        stranded = found.stranded
        to_publish = found.requeued + found.unpublished + stranded
        if found.requeued or found.unpublished or stranded:
            log.info(
                "run %s: re-queued %d, publishing again %d unconfirmed and %d stranded",
                run_id,
                len(found.requeued),
                len(found.unpublished),
                len(stranded),
            )
        report.requeued += len(found.requeued)
        report.republished += len(found.unpublished) + len(stranded)
        dispatch(self.broker, self.runtime.machine, to_publish)
        self._publish_aged(run_id, found.aged, report)

    def _age_out_if_too_old(self, run_id: str, age_ms: int, report: ReconcileReport) -> bool:
        """Fail a run open past ``run_max_age_s`` (its nodes at work dead-lettered, so a
        replay re-opens it); True if it did."""
        max_age_s = self.runtime.settings.limits.run_max_age_s
        if max_age_s is None or age_ms < max_age_s * 1000:
            return False
        aged = self.runtime.machine.age_out(run_id, max_age_s)
        if aged.status != RunStatus.FAILED.value:
            return False
        log.warning(
            "run %s was open past its maximum age (%d s): failed, %d dead letter(s)",
            run_id,
            max_age_s,
            aged.dead_letters,
        )
        stop_work(self.runtime, self.broker, run_id, aged.stopped)
        self._forget_if_over(run_id, aged.status, report)
        return True

    def _publish_aged(self, run_id: str, aged: list[ReadyNode], report: ReconcileReport) -> None:
        """Publish the nodes that waited past ``priority_aging_s`` again, ahead of every
        priority; the message each leaves behind is dropped at its claim (its fence)."""
        if not aged:
            return
        log.info("run %s: %d node(s) waited past priority aging, sent ahead", run_id, len(aged))
        report.republished += len(aged)
        dispatch(self.broker, self.runtime.machine, [aged_node(node) for node in aged])

    def _forget_if_over(self, run_id: str, status: str, report: ReconcileReport) -> None:
        if status == "missing":  # no run hash: being created, or expired
            created = self.runtime.client.zscore(self.runtime.keys.run_index, run_id)
            now = self.runtime.store.server_time_ms()
            if created is not None and now - created < ORPHAN_GRACE_MS:
                return
        elif not RunStatus(status).is_final:
            return
        self.runtime.forget_active(run_id)
        report.finished.append(run_id)

    def release(self) -> bool:
        """Give the buckets up (on a clean stop), so that the other reconcilers take them
        at their next pass instead of when the leases expire; True if this one held any."""
        return self.leases.release_all() > 0

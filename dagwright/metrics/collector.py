"""The Prometheus collector: every dagwright metric family, read from Redis at scrape time.

The metric names are a contract (ops dashboards and alerts use them): change none.
``dagwright_up`` says whether the state store could be read; when it could not, it is
the only dagwright metric of the scrape (the exporters' convention, as ``redis_up``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from dagwright.metrics.readings import MetricsReader, Readings
from dagwright.resilience.breakers import BreakerStatus
from dagwright.telemetry import counters

log = logging.getLogger(__name__)

BREAKER_STATE_VALUES = {"closed": 0, "half-open": 1, "open": 2}


class DagwrightCollector(Collector):
    def __init__(self, reader: MetricsReader) -> None:
        self.reader = reader
        self._down = False

    def collect(self) -> Iterator[Metric]:
        try:
            readings = self.reader.read()
        except Exception as exc:  # a scrape answers, whatever Redis does
            self._note_down(exc)
            yield up(False)
            return
        if self._down:
            log.warning("metrics: the state store answers again")
            self._down = False
        yield up(True)
        yield from families(readings)

    def _note_down(self, exc: Exception) -> None:
        """One line when the state store stops answering (not one per scrape)."""
        if not self._down:
            log.warning(
                "metrics: cannot read the state store (%s: %s); serving dagwright_up 0",
                type(exc).__name__,
                exc,
            )
        self._down = True


def up(answered: bool) -> Metric:
    return GaugeMetricFamily(
        "dagwright_up",
        "1 if the state store (Redis) could be read for this scrape, else 0",
        value=1 if answered else 0,
    )


def families(readings: Readings) -> Iterator[Metric]:
    yield runs(readings.runs)
    yield node_durations(readings.counters[counters.NODE_DURATION])
    if readings.queue_depths is not None:
        yield queue_depths(readings.queue_depths)
    yield pooled_nodes(readings.pooled)
    if readings.queue_depths is not None:
        yield ready_nodes(readings.queue_depths, readings.pooled)
    yield from llm_usage(readings.counters)
    yield breaker_states(readings.breakers)
    yield GaugeMetricFamily(
        "dagwright_dlq_depth",
        "Dead letters not yet replayed or purged",
        value=readings.dlq_depth,
    )
    yield sandbox_executions(readings.counters[counters.SANDBOX_EXECUTIONS])
    yield GaugeMetricFamily(
        "dagwright_workers_online",
        "Workers whose presence record is alive",
        value=readings.workers_online,
    )


def runs(by_status: dict[str, int]) -> Metric:
    family = GaugeMetricFamily(
        "dagwright_runs", "Runs retained in the state store, by status", labels=["status"]
    )
    for status, count in by_status.items():
        family.add_metric([status], count)
    return family


def node_durations(counted: dict[tuple[str, ...], float]) -> Metric:
    """The histogram from its per-bucket counts (made cumulative here) and sums."""
    family = HistogramMetricFamily(
        "dagwright_node_duration_seconds",
        "Node attempts by worker type and outcome, and how long each ran",
        labels=["worker_type", "outcome"],
    )
    series: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for (worker_type, outcome, field), value in counted.items():
        series[(worker_type, outcome)][field] = value
    for labels, fields in sorted(series.items()):
        cumulative, buckets = 0.0, []
        for bound in counters.DURATION_BUCKETS_S:
            cumulative += fields.get(counters.format_bound(bound), 0)
            buckets.append((floatToGoString(bound), cumulative))
        buckets.append(("+Inf", cumulative + fields.get(counters.INF_BUCKET, 0)))
        family.add_metric(list(labels), buckets, counters.duration_sum(fields))
    return family


def queue_depths(depths: dict[str, int]) -> Metric:
    family = GaugeMetricFamily(
        "dagwright_queue_depth", "Messages waiting in each queue", labels=["queue"]
    )
    for queue, depth in depths.items():
        family.add_metric([queue], depth)
    return family


def pooled_nodes(pooled: dict[str, int]) -> Metric:
    family = GaugeMetricFamily(
        "dagwright_queue_pooled",
        "Nodes of pulled fan-outs waiting in their runs' pools, by queue (no message yet)",
        labels=["queue"],
    )
    for queue, count in sorted(pooled.items()):
        family.add_metric([queue], count)
    return family


def ready_nodes(depths: dict[str, int], pooled: dict[str, int]) -> Metric:
    """What autoscaling reads: every node a queue's workers could start now. With the
    state on a Redis Cluster the pooled nodes are the reconcilers' totals by bucket, up
    to a reconcile interval old (execution/bucket_backlog.py)."""
    family = GaugeMetricFamily(
        "dagwright_queue_ready",
        "Nodes ready to run on each queue: messages waiting plus pooled nodes",
        labels=["queue"],
    )
    for queue in sorted(depths.keys() | pooled.keys()):
        family.add_metric([queue], depths.get(queue, 0) + pooled.get(queue, 0))
    return family


def llm_usage(counted: dict[str, dict[tuple[str, ...], float]]) -> Iterator[Metric]:
    yield counter_family(
        "dagwright_llm_calls", "LLM calls made (cache hits excluded)", ["model"],
        counted[counters.LLM_CALLS],
    )  # fmt: skip
    yield counter_family(
        "dagwright_llm_tokens", "LLM tokens by model and kind", ["model", "kind"],
        counted[counters.LLM_TOKENS],
    )  # fmt: skip
    yield counter_family(
        "dagwright_llm_cost_usd", "Cost of the LLM calls in USD, at the configured prices",
        ["model"], counted[counters.LLM_COST_USD],
    )  # fmt: skip
    yield counter_family(
        "dagwright_llm_unpriced_tokens",
        "LLM tokens of models missing from model_prices: their cost is unknown, not counted",
        ["model"], counted[counters.LLM_UNPRICED_TOKENS],
    )  # fmt: skip


def sandbox_executions(counted: dict[tuple[str, ...], float]) -> Metric:
    return counter_family(
        "dagwright_sandbox_executions",
        "Programs run in the sandbox, by backend and outcome",
        ["backend", "outcome"],
        counted,
    )


def counter_family(
    name: str, documentation: str, labels: list[str], counted: dict[tuple[str, ...], float]
) -> Metric:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for values, total in sorted(counted.items()):
        family.add_metric(list(values), total)
    return family


def breaker_states(statuses: list[BreakerStatus]) -> Metric:
    family = GaugeMetricFamily(
        "dagwright_breaker_state",
        "Circuit breakers: 0 closed, 1 half-open (or open with its time up: the next call "
        "is a probe), 2 open",
        labels=["breaker"],
    )
    for status in statuses:
        state = status.state
        if state == "open" and status.open_for_s <= 0:
            state = "half-open"
        family.add_metric([status.name], BREAKER_STATE_VALUES.get(state, 0))
    return family

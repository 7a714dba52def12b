"""Property: whatever lands on a ``dw.*`` queue, a live worker takes it off and stays up,
and a normal run completes afterwards.

Items are pushed raw onto the queue's Redis list, as anyone who can write to the broker
could: bytes that are not JSON, JSON that is not kombu's envelope, and envelopes with
random bodies, headers, content types, encodings and compression."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.keys import NODE_EXECUTE_TASK, PLAN_TASK, RECONCILE_TASK
from dagwright.settings import Settings
from tests.support.processes import Workers
from tests.support.raw_messages import push
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

QUEUE = "dw.function"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
bodies = st.one_of(
    st.binary(max_size=40),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.tuples(json_values, json_values, json_values).map(lambda t: json.dumps(list(t)).encode()),
    st.tuples(st.text(max_size=6), st.text(max_size=6), st.integers()).map(
        lambda args: json.dumps([list(args), {}, {}]).encode()
    ),
)
headers = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "task": st.sampled_from([NODE_EXECUTE_TASK, PLAN_TASK, RECONCILE_TASK, "x.y"]),
            "id": st.one_of(st.text(max_size=8), st.integers()),
        },
        optional={
            "compression": st.sampled_from(
                ["application/x-bz2", "application/x-gzip", "zlib", "nope"]
            ),
            "timelimit": json_values,
            "eta": st.one_of(st.text(max_size=10), st.integers()),
            "argsrepr": json_values,
        },
    ),
)


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(bodies)
    return {
        "body": draw(st.sampled_from([base64.b64encode(body).decode(), body.decode("latin-1")])),
        "content-type": draw(
            st.sampled_from(
                ["application/json", "application/data", "application/text", "text/plain"]
            )
            | json_values
        ),
        "content-encoding": draw(st.sampled_from(["utf-8", "binary", "latin-1"]) | json_values),
        "headers": draw(headers),
        "properties": draw(
            st.fixed_dictionaries(
                {
                    "delivery_tag": st.text(min_size=1, max_size=8),
                    "body_encoding": st.sampled_from(["base64", "rot13"]) | json_values,
                    "delivery_info": st.sampled_from(
                        [{"exchange": QUEUE, "routing_key": QUEUE}, {}]
                    )
                    | json_values,
                }
            )
            | json_values
        ),
    }


raw_items = st.one_of(
    st.binary(max_size=40),
    json_values.map(json.dumps),
    envelopes().map(json.dumps),
)


def test_a_worker_survives_anything_on_its_queue_and_runs_a_plan_after(
    subprocess_settings: Settings, workers: Workers
) -> None:
    broker = redis.Redis.from_url(subprocess_settings.redis.broker_url or "")
    worker = workers.start(subprocess_settings, concurrency=1)
    client = Client(subprocess_settings)
    plan = PlanBuilder("before the fuzz")
    plan.function("a", "count")
    assert client.submit(plan.build()).wait(timeout=60).status == RunStatus.SUCCEEDED

    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(item=raw_items)
    def survives(item: str | bytes) -> None:
        push(broker, QUEUE, item)
        wait_until(lambda: broker.llen(QUEUE) == 0, timeout=20, what="the worker taking it")
        assert worker.process.poll() is None, worker.log_tail()

    survives()
    plan = PlanBuilder("after the fuzz")
    plan.function("a", "count")
    assert client.submit(plan.build()).wait(timeout=60).status == RunStatus.SUCCEEDED
    assert worker.process.poll() is None, worker.log_tail()
    assert "Unrecoverable" not in worker.log_path.read_text()

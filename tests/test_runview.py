"""The run view of ``dagwright watch`` as pure functions: levels, order, what fits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rich.console import Console

from dagwright.cli.runview import (
    RunView,
    dependency_levels,
    dependency_order,
    format_seconds,
    rows_that_fit,
)
from dagwright.models import NodeState, NodeStatus, RunCounts, RunState, RunStatus, Usage

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def run_of(nodes: dict[str, NodeState], status: RunStatus = RunStatus.RUNNING) -> RunState:
    return RunState(
        run_id="r1",
        status=status,
        created_at=T0,
        counts=RunCounts(total=len(nodes)),
        output_nodes=[],
        nodes=nodes,
    )


def node(status: NodeStatus, finished_s: float | None = None, **extra: object) -> NodeState:
    finished = T0 + timedelta(seconds=finished_s) if finished_s is not None else None
    return NodeState(status=status, type="function", finished_at=finished, **extra)  # type: ignore[arg-type]


def test_levels_follow_the_deepest_dependency_and_a_long_chain_costs_no_recursion() -> None:
    deps = {"a": [], "b": ["a"], "c": ["a", "b"], "d": []}
    assert dependency_levels(deps) == {"a": 0, "b": 1, "c": 2, "d": 0}
    chain = {f"n{i}": ([f"n{i - 1}"] if i else []) for i in range(20_000)}
    assert dependency_levels(chain)["n19999"] == 19_999


def test_order_is_by_level_then_as_the_run_holds_the_nodes() -> None:
    deps = {"z": [], "b": ["z"], "a": [], "c": ["a"]}
    assert dependency_order(deps, dependency_levels(deps)) == ["z", "a", "b", "c"]


def test_rows_that_do_not_fit_leave_the_running_failed_and_latest_finished_on_screen() -> None:
    nodes = {f"done{i}": node(NodeStatus.SUCCEEDED, finished_s=i) for i in range(10)}
    nodes |= {"busy": node(NodeStatus.RUNNING), "bad": node(NodeStatus.FAILED, finished_s=1)}
    nodes |= {f"next{i}": node(NodeStatus.PENDING) for i in range(5)}
    state = run_of(nodes)
    order = list(nodes)
    shown, left_out = rows_that_fit(state, order, room=4)
    assert shown == ["done8", "done9", "busy", "bad"]  # the two latest finished, in order
    assert left_out == {"succeeded": 8, "pending": 5}
    assert rows_that_fit(state, order, room=100) == (order, {})


def test_a_waiting_node_shows_how_to_approve_it_and_tokens_are_shown_per_node() -> None:
    usage = Usage(input_tokens=1200, output_tokens=34, cost_usd=0.0123, llm_calls=2)
    nodes = {
        "draft": node(NodeStatus.SUCCEEDED, finished_s=3, usage=usage, attempts=1),
        "publish": node(NodeStatus.WAITING_APPROVAL, depends_on=["draft"]),
    }
    view = RunView(run_of(nodes))
    console = Console(width=160, record=True, color_system=None)
    console.print(view.render(height=30, now=(T0 + timedelta(seconds=5)).timestamp()))
    text = console.export_text()
    assert "run r1 running · 5.0s" in text
    assert "waiting for approval: publish · dagwright approve r1 publish" in text
    assert "1,200" in text and "34" in text and "$0.0123" in text
    assert "  publish  waiting_approval" in text


def test_durations_read_well() -> None:
    assert [format_seconds(s) for s in (None, 0.04, 59.94, 61, 3 * 3600 + 120)] == [
        "",
        "0.0s",
        "59.9s",
        "1m01s",
        "3h02m",
    ]


def test_a_long_node_id_is_shown_whole_on_an_80_column_terminal() -> None:
    long_id = "research_the_pricing_pages_of_every_competitor_in_europe"  # 56 characters
    nodes = {long_id: node(NodeStatus.RUNNING), "b": node(NodeStatus.PENDING, depends_on=[long_id])}
    console = Console(width=80, record=True, color_system=None)
    console.print(RunView(run_of(nodes)).render(height=30, now=T0.timestamp()))
    assert long_id in console.export_text()


def test_skipped_nodes_are_counted_and_listed() -> None:
    nodes = {
        "work": node(NodeStatus.SUCCEEDED, finished_s=1),
        "cleanup": node(NodeStatus.SKIPPED, finished_s=1, depends_on=["work"]),
    }
    state = run_of(nodes, RunStatus.SUCCEEDED).model_copy(
        update={"counts": RunCounts(total=2, done=2, succeeded=1, skipped=1)}
    )
    console = Console(width=160, record=True, color_system=None)
    console.print(RunView(state).render(height=30, now=(T0 + timedelta(seconds=2)).timestamp()))
    text = console.export_text()
    assert "2/2 done · 0 running · 0 failed · 1 skipped · " in text
    assert "cleanup  skipped" in text


def mapped_run() -> RunState:
    """find -> research (mapped over 12 items: 9 done, 2 running, 1 failed) -> report."""
    nodes = {"find": node(NodeStatus.SUCCEEDED, finished_s=1)}
    nodes["research"] = node(NodeStatus.BLOCKED, depends_on=["find"])
    nodes["report"] = node(NodeStatus.PENDING, depends_on=["research"])
    for i in range(12):
        status = NodeStatus.SUCCEEDED if i < 9 else NodeStatus.RUNNING
        nodes[f"research[{i}]"] = node(
            status if i != 10 else NodeStatus.FAILED, depends_on=["find"]
        )
    return run_of(nodes)


def test_a_maps_children_are_one_row_under_it_in_watch_and_status() -> None:
    from dagwright.cli.output import print_nodes

    console = Console(width=160, record=True, color_system=None)
    console.print(RunView(mapped_run()).render(height=30, now=T0.timestamp()))
    print_nodes(console, mapped_run().nodes)
    text = console.export_text()
    assert "research[0..11]  9 succeeded, 2 running, 1 failed" in text
    assert "first failed: research[10]" in text
    assert "research[3]" not in text
    watch_rows = [line.strip().split()[0] for line in text.splitlines() if "research" in line]
    assert watch_rows[:3] == ["research", "research[0..11]", "report"]

"""The run page's folding and paging (static/js/graph-model.js), run in chromium on
made-up runs: what the page draws of a big run, box by box."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api_server import ApiServer
from tests.support.browser import browser, chromium  # noqa: F401 (fixtures)

pytestmark = pytest.mark.subprocess  # chromedriver and chromium are child processes

# Runs graph-model.js's visibleGraph on `nodes` and returns what a test compares.
SCRIPT = """
const [nodes, expanded, page, done] = arguments;
import("/static/js/graph-model.js").then((model) => {
  const graph = model.visibleGraph(nodes, new Set(expanded), page);
  const items = [...graph.items.values()].map((item) => ({
    id: item.id, kind: item.kind, size: item.members.length,
    status: item.kind === "group"
      ? model.groupStatus(model.statusCounts(nodes, item.members)) : null,
    signature: item.signature || null,
  }));
  const opened = graph.opened.map(
    (group) => ({signature: group.signature, size: group.members.length}));
  done({items, edges: graph.edges, pages: graph.pages, page: graph.page, hidden: graph.hidden,
        limit: model.MAX_VISIBLE, opened});
}, (error) => done({error: String(error)}));
"""


def node(type_: str = "function", deps: list[str] | None = None, status: str = "pending") -> Any:
    return {"type": type_, "depends_on": deps or [], "status": status}


def fan(width: int, statuses: list[str] | None = None) -> dict[str, Any]:
    """root -> width siblings -> join."""
    nodes = {"root": node(status="succeeded")}
    for i in range(width):
        status = statuses[i % len(statuses)] if statuses else "pending"
        nodes[f"m{i}"] = node(deps=["root"], status=status)
    nodes["join"] = node("writer", [f"m{i}" for i in range(width)])
    return nodes


@pytest.fixture
def visible(browser: Any, api_server: ApiServer) -> Any:  # noqa: F811
    browser.get(f"{api_server.url}/login")  # any page of the site: modules load from it

    def graph_of(nodes: dict[str, Any], expanded: list[str] | None = None, page: int = 0) -> Any:
        answer = browser.execute_async_script(SCRIPT, nodes, expanded or [], page)
        assert "error" not in answer, answer
        return answer

    return graph_of


def test_a_small_run_is_drawn_node_by_node(visible: Any) -> None:
    graph = visible(fan(5))
    assert sorted(item["id"] for item in graph["items"]) == [
        "join", "m0", "m1", "m2", "m3", "m4", "root",
    ]  # fmt: skip
    assert len(graph["edges"]) == 10 and graph["pages"] == [[0, 2]]


def test_ten_like_siblings_fold_in_a_small_run_and_nine_do_not(visible: Any) -> None:
    """A fan-out of 25 in a 27-node run: one box, not a column 25 boxes tall."""
    graph = visible(fan(25))
    group = next(item for item in graph["items"] if item["kind"] == "group")
    kinds = {item["id"]: (item["kind"], item["size"]) for item in graph["items"]}
    assert kinds == {"root": ("node", 1), "join": ("node", 1), group["id"]: ("group", 25)}
    assert graph["opened"] == []
    opened = visible(fan(25), expanded=[group["signature"]])
    assert len(opened["items"]) == 27
    assert opened["opened"] == [{"signature": group["signature"], "size": 25}]  # folds again
    assert {item["kind"] for item in visible(fan(9))["items"]} == {"node"}


def test_siblings_of_a_big_run_fold_into_one_group_with_its_edges(visible: Any) -> None:
    graph = visible(fan(998, statuses=["succeeded", "running", "failed", "pending"]))
    kinds = {item["id"]: (item["kind"], item["size"]) for item in graph["items"]}
    group = next(item for item in graph["items"] if item["kind"] == "group")
    assert kinds == {"root": ("node", 1), "join": ("node", 1), group["id"]: ("group", 998)}
    assert group["status"] == "failed"  # the most urgent status of its members shows
    assert sorted(graph["edges"]) == sorted([["root", group["id"]], [group["id"], "join"]])

    opened = visible(fan(998), expanded=[group["signature"]])
    assert len(opened["items"]) == 1000 - opened["hidden"]
    assert all(item["kind"] == "node" for item in opened["items"])


def test_siblings_that_differ_in_type_or_edges_stay_apart(visible: Any) -> None:
    nodes = fan(60)
    nodes["odd"] = node("python", ["root"])  # another type
    nodes["late"] = node(deps=["root", "m0"])  # other dependencies
    nodes["join"]["depends_on"] += ["odd", "late"]
    ids = {item["id"] for item in visible(nodes)["items"]}
    group = "group:function|root|join"  # m1..m59; m0 has one more dependent (late)
    assert ids == {"root", "join", "odd", "late", "m0", group}


def test_a_graph_that_does_not_fold_is_paged_by_layers(visible: Any) -> None:
    width, layers = 20, 50  # each node depends on two of the layer before: nothing folds
    nodes = {}
    for layer in range(layers):
        for column in range(width):
            above = [] if layer == 0 else [(layer - 1, column), (layer - 1, (column + 1) % width)]
            nodes[f"n{layer}-{column}"] = node(deps=[f"n{a}-{b}" for a, b in above])
    first = visible(nodes)
    seen: list[str] = []
    for page in range(len(first["pages"])):
        graph = visible(nodes, page=page)
        assert 0 < len(graph["items"]) <= graph["limit"]
        assert graph["hidden"] == 1000 - len(graph["items"])
        ids = {item["id"] for item in graph["items"]}
        assert all(a in ids and b in ids for a, b in graph["edges"])
        seen += ids
    assert sorted(seen) == sorted(nodes)  # every node on exactly one page


def test_a_maps_children_fold_into_one_group_before_their_map_whatever_the_size(
    visible: Any,
) -> None:
    nodes = {"find": node(status="succeeded"), "research": node(deps=["find"])}
    nodes["report"] = node("writer", ["research"])
    for i in range(4):
        status = "succeeded" if i < 3 else "running"
        nodes[f"research[{i}]"] = node(deps=["find"], status=status)
    graph = visible(nodes)
    kinds = {item["id"]: (item["kind"], item["size"]) for item in graph["items"]}
    assert kinds == {
        "find": ("node", 1),
        "research": ("node", 1),
        "report": ("node", 1),
        "group:map:research": ("group", 4),
    }
    group = "group:map:research"
    assert sorted(graph["edges"]) == sorted(
        [["find", "research"], ["find", group], [group, "research"], ["research", "report"]]
    )
    assert next(i for i in graph["items"] if i["id"] == group)["status"] == "running"
    opened = visible(nodes, expanded=["map:research"])
    assert {item["id"] for item in opened["items"]} >= {f"research[{i}]" for i in range(4)}


def test_an_opened_map_of_a_big_run_shows_each_child(visible: Any) -> None:
    nodes = {"find": node(status="succeeded"), "research": node(deps=["find"])}
    nodes |= {f"research[{i}]": node(deps=["find"]) for i in range(60)}
    folded = visible(nodes)
    assert {item["id"] for item in folded["items"]} == {"find", "research", "group:map:research"}
    opened = visible(nodes, expanded=["map:research"])
    assert len(opened["items"]) == 62 and {i["kind"] for i in opened["items"]} == {"node"}

"""Schemas that users and models write (``dagwright/json_schemas.py``): a ``$ref`` outside
the document is a schema problem and nothing is ever fetched (by the client, the API
server or a worker running a planner's plan); patterns are matched in linear time; the
schema itself is bounded. Loopback listeners record any connection a fetch would make."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Self

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.errors import PlanError
from dagwright.json_schemas import (
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_MAPPINGS,
    MAX_SCHEMA_REFERENCES,
    schema_errors,
    schema_problems,
    schema_validator,
)
from dagwright.models import Plan
from dagwright.plans.files import parse_plan
from dagwright.testing import FakeAnthropicServer
from tests.support.api_server import ApiServer
from tests.support.llm_script import PLANNER, text, turn
from tests.support.loopback_http import LoopbackServer

WRITER = "You are the writer"
EVIL_PATTERN = "^(a+)+$"  # Python's re: 2^n steps on n a's and a '!'


class RecordingListener(LoopbackServer):
    """Answers every GET with an empty JSON Schema, and records its path."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        super().__init__()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                listener.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


class SilentListener:
    """Accepts connections on 127.0.0.1 and never answers: a fetch would wait forever."""

    def __init__(self) -> None:
        self.accepted = 0
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.1)
        self._held: list[socket.socket] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}/schema.json"

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            self._held.append(connection)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        for connection in [*self._held, self._socket]:
            connection.close()


@pytest.fixture
def listener() -> Any:
    with RecordingListener() as server:
        yield server


def referring(url: str) -> dict[str, Any]:
    """An inputs schema that every value is checked against ``url``'s schema."""
    return {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "allOf": [{"$ref": url}],
    }


def plan_taking(schema: dict[str, Any]) -> Plan:
    node = {"id": "a", "type": "function", "function": "concat", "params": {"parts": ["x"]}}
    return parse_plan({"inputs": schema, "nodes": [node]})


def outside_line(url: str) -> str:
    return (
        f"inputs.allOf.0.$ref: {url!r} points outside the schema; a reference may only name "
        "a part of the same schema (`#/$defs/...`), nothing is fetched"
    )


# -- $ref: nothing fetched ---------------------------------------------------------


def test_a_submit_whose_inputs_refer_to_a_url_is_refused_and_fetches_nothing(
    client: Client, listener: RecordingListener
) -> None:
    url = f"{listener.url}/schema.json"
    with pytest.raises(PlanError) as refused:
        client.submit(plan_taking(referring(url)), inputs={"name": "Ada"})
    assert refused.value.problems == [outside_line(url)]
    assert listener.paths == []
    assert client.list_runs() == []


def test_the_api_refuses_an_outside_ref_with_a_422_and_fetches_nothing(
    api: ApiServer, listener: RecordingListener
) -> None:
    url = f"{listener.url}/schema.json"
    plan = plan_taking(referring(url)).model_dump(mode="json", exclude_defaults=True)
    with api.http("operate") as http:
        response = http.post("/api/v1/runs", json={"plan": plan, "inputs": {"name": "Ada"}})
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == outside_line(url)
    assert listener.paths == []


def test_a_file_ref_is_refused_alike_whether_the_file_exists_or_not(
    api: ApiServer, tmp_path: Path
) -> None:
    existing = tmp_path / "exists.json"
    existing.write_text("{}")
    answers = {}
    with api.http("operate") as http:
        for path in ("/etc/hostname", str(existing), str(tmp_path / "missing.json")):
            plan = plan_taking(referring(f"file://{path}"))
            body = {"plan": plan.model_dump(mode="json", exclude_defaults=True)}
            response = http.post("/api/v1/runs", json={**body, "inputs": {"name": "Ada"}})
            answers[path] = (response.status_code, response.json()["detail"].replace(path, "P"))
    assert set(answers.values()) == {(422, outside_line("file://P"))}


def test_a_listener_that_never_answers_holds_up_nothing(api: ApiServer) -> None:
    with SilentListener() as silent, api.http("operate") as http:
        plan = plan_taking(referring(silent.url)).model_dump(mode="json", exclude_defaults=True)
        started = time.monotonic()
        for _ in range(5):
            response = http.post("/api/v1/runs", json={"plan": plan, "inputs": {"name": "A"}})
            assert response.status_code == 422, response.text
        assert http.get("/api/v1/whoami").status_code == 200
        assert time.monotonic() - started < 5
    assert silent.accepted == 0


@pytest.mark.parametrize(
    "reference", ["urn:example:thing", "other.json#/x", "//evil.example/x", "#/$defs/none"]
)
def test_every_reference_but_one_within_the_document_is_a_schema_problem(reference: str) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": reference}}}
    [problem] = schema_problems(schema, "inputs")
    assert problem.startswith(f"inputs.properties.a.$ref: {reference!r} ")
    inside = {
        "type": "object",
        "$defs": {"word": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/word"}, "b": {"$anchor": "b", "type": "integer"}},
        "additionalProperties": {"$ref": "#b"},
    }
    assert schema_problems(inside, "inputs") == []
    mismatches = schema_errors(schema_validator(inside), {"a": 1, "c": "x"})
    assert sorted(error.message for error in mismatches) == [
        "'x' is not of type 'integer'",
        "1 is not of type 'string'",
    ]


def test_an_output_schema_with_an_outside_ref_is_a_plan_problem(
    client: Client, listener: RecordingListener
) -> None:
    url = f"{listener.url}/book.json"
    plan = PlanBuilder("A book")
    schema = {"type": "object", "properties": {"book": {"$ref": url}}}
    plan.agent("book", "writer", "Name a book.", output_schema=schema)
    with pytest.raises(PlanError, match=r"output_schema\.properties\.book\.\$ref: .* outside"):
        client.submit(plan.build())
    assert listener.paths == []


# -- a planner's plan --------------------------------------------------------------


def submits_plan(plan: dict[str, Any], messages_count: int) -> dict[str, Any]:
    return {
        "match": {"system_contains": PLANNER, "messages_count": messages_count},
        "reply": {"content": [{"type": "tool_use", "name": "submit_plan", "input": plan}]},
    }


def writer_plan(**node: Any) -> dict[str, Any]:
    return {
        "goal": "g",
        "output": "book",
        "nodes": [{"id": "book", "type": "writer", "instruction": "Name a book.", **node}],
    }


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize("where", ["inputs", "output_schema"])
def test_a_planners_plan_with_an_outside_ref_goes_back_to_it_and_fetches_nothing(
    where: str, client: Client, fake_llm: FakeAnthropicServer, listener: RecordingListener
) -> None:
    url = f"{listener.url}/{where}.json"
    referred = {"type": "object", "properties": {"title": {"$ref": url}}}
    bad = writer_plan(output_schema=referred) if where == "output_schema" else writer_plan()
    if where == "inputs":
        bad["inputs"] = {**referred, "allOf": [{"$ref": url}]}
    fake_llm.add(
        submits_plan(bad, messages_count=1),
        submits_plan(writer_plan(), messages_count=3),
        turn(WRITER, 1, text("Dune")),
    )
    state = client.submit(goal="Name a book").wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    rejection = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert rejection["is_error"]
    if where == "inputs":  # a planned plan declares no inputs schema at all (plan_language)
        assert "`inputs`: run options are the submitter's" in rejection["content"]
    else:
        assert f"{url!r} points outside the schema" in rejection["content"]
    assert listener.paths == []


# -- patterns: linear time ---------------------------------------------------------


REDOS_SCRIPT = """
import time
from dagwright.errors import RunInputError
from dagwright.plans.files import parse_plan
from dagwright.plans.run_inputs import bind_inputs

EVIL = "^(a+)+$"
schema = {
    "type": "object",
    "properties": {"word": {"type": "string", "pattern": EVIL}},
    "patternProperties": {EVIL: {"type": "integer"}},
    "additionalProperties": False,
}
node = {"id": "a", "type": "function", "function": "concat", "params": {"parts": ["x"]}}
plan = parse_plan({"inputs": schema, "nodes": [node]})
bind_inputs(plan, {"word": "aa"}, 100_000)  # imports jsonschema and RE2
hostile = "a" * 40 + "!"
started = time.monotonic()
try:
    bind_inputs(plan, {"word": hostile, hostile: 1}, 100_000)
except RunInputError as exc:
    problems = exc.problems
print(time.monotonic() - started)
print("\\n".join(problems))
"""


def test_a_catastrophic_pattern_is_matched_in_a_fraction_of_a_second() -> None:
    # In a child process: Python's re holds the GIL while it backtracks, so a test in this
    # process could not even time it out.
    try:
        done = subprocess.run(
            [sys.executable, "-c", REDOS_SCRIPT], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("matching ^(a+)+$ took over a minute: backtracking")
    seconds, *problems = done.stdout.splitlines()
    assert float(seconds) < 0.5, done.stderr
    hostile = "a" * 40 + "!"
    assert problems == [
        f"input {hostile!r} is not an input of this plan (it takes word)",
        f"input 'word': {hostile!r} does not match '^(a+)+$'",
    ]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", r"invalid escape sequence: \1"),
        ("(?=a)b", "invalid perl operator: (?="),
        (".{0,1000}x.{0,1000}y", "it compiles to 18006 instructions; the limit is 4000"),
    ],
)
def test_a_pattern_re2_cannot_run_is_a_schema_problem(pattern: str, reason: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}
    assert schema_problems(schema, "inputs") == [
        f"inputs.properties.a.pattern: {pattern!r} is refused: {reason} (patterns are matched "
        "by RE2, in linear time: no backreferences, no lookarounds)"
    ]
    keyed = {"type": "object", "patternProperties": {pattern: {}}}
    [problem] = schema_problems(keyed, "output_schema")
    assert problem.startswith(f"output_schema.patternProperties.{pattern}: {pattern!r} is ref")


def test_matching_is_bounded_by_text_times_pattern_size() -> None:
    # RE2's DFA gives up on some patterns; its NFA takes text x program time (here a 1 MiB
    # string against .{0,1000}x.{0,1000}y took 250 s).
    schema = {"type": "object", "additionalProperties": {"pattern": "[a-z]{1,1000}1"}}
    assert schema_problems(schema, "inputs") == []
    validator = schema_validator(schema)
    assert schema_errors(validator, {"a": "x" * 4_000 + "1"}) == []
    started = time.monotonic()
    # 100 times the bound: 5 to 25 s unbounded.
    [error] = schema_errors(validator, {str(n): "x" * 2_000 for n in range(250)})
    assert time.monotonic() - started < 3
    assert error.message.startswith("it is too long to be matched against the schema's patterns")


@hypothesis_settings(max_examples=300, deadline=None)
@given(pattern=st.text(max_size=20), value=st.text(max_size=20))
def test_any_pattern_is_either_a_problem_or_runs(pattern: str, value: str) -> None:
    schema = {"type": "object", "patternProperties": {pattern: {"pattern": pattern}}}
    if schema_problems(schema, "inputs"):
        return
    errors = schema_errors(schema_validator(schema), {value: value})
    assert all(error.message for error in errors)


def test_unevaluated_properties_beside_patterns_is_refused() -> None:
    # jsonschema matches them with Python's re when it looks for unevaluated properties.
    schema = {"patternProperties": {EVIL_PATTERN: {}}, "unevaluatedProperties": False}
    assert schema_problems(schema, "inputs") == [
        "inputs: `unevaluatedProperties` cannot be used with `patternProperties` in one "
        "schema; use `additionalProperties` beside the patterns"
    ]


# -- the schema itself, bounded ----------------------------------------------------


def test_a_schema_is_bounded_in_size_depth_and_references() -> None:
    big = {"type": "object", "description": "x" * MAX_SCHEMA_BYTES}
    [too_big] = schema_problems(big, "inputs")
    assert too_big.startswith("inputs: the schema is 32")
    assert too_big.endswith(f"bytes of JSON; the limit is {MAX_SCHEMA_BYTES}")
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(20):
        deep = {"type": "object", "properties": {"x": deep}}
    assert schema_problems(deep, "inputs") == [
        "inputs: the schema is nested 41 levels deep; the limit is 32"
    ]
    wide = {"type": "object", "properties": {f"p{n}": {} for n in range(MAX_SCHEMA_MAPPINGS)}}
    assert schema_problems(wide, "inputs") == [
        f"inputs: the schema has {MAX_SCHEMA_MAPPINGS + 2} mappings (subschemas and the like); "
        f"the limit is {MAX_SCHEMA_MAPPINGS}"
    ]
    count = MAX_SCHEMA_REFERENCES + 1
    chain = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(count)}
    refs = {"$defs": {**chain, f"d{count}": {}}}
    assert schema_problems(refs, "inputs") == [
        f"inputs: the schema has {count} references; the limit is {MAX_SCHEMA_REFERENCES}"
    ]


def test_a_reference_back_to_itself_in_place_is_refused_and_a_recursive_tree_is_not() -> None:
    for looping in (
        {"$ref": "#"},
        {"allOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"not": {"$ref": "#"}}}},
    ):
        [problem] = schema_problems(looping, "inputs")
        assert "refers back to itself without going into the value" in problem
    tree = {"type": "object", "properties": {"child": {"$ref": "#"}, "name": {"type": "string"}}}
    assert schema_problems(tree, "inputs") == []
    nested: dict[str, Any] = {"name": 1}
    for _ in range(10):
        nested = {"child": nested}
    [mismatch] = schema_errors(schema_validator(tree), nested)
    assert mismatch.message == "1 is not of type 'string'"


def test_an_id_or_a_dialect_naming_a_url_fetches_nothing(listener: RecordingListener) -> None:
    schema = {
        "$schema": f"{listener.url}/dialect.json",
        "$id": f"{listener.url}/root.json",
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/word"}},
        "$defs": {"word": {"type": "string"}},
    }
    assert schema_problems(schema, "inputs") == []
    [mismatch] = schema_errors(schema_validator(schema), {"a": 1})
    assert mismatch.message == "1 is not of type 'string'"
    assert listener.paths == []


def test_a_schema_never_checked_still_fetches_nothing(listener: RecordingListener) -> None:
    # A node's output_schema reaches the worker checked; a plan stored by an older
    # version may not have been.
    unchecked = schema_validator({"$ref": f"{listener.url}/x.json"})
    [error] = schema_errors(unchecked, {"a": 1})
    assert error.message.startswith("its schema cannot be used: Unresolvable: http://127.0.0.1:")
    [error] = schema_errors(schema_validator({"pattern": "(?<=a)b"}), "ab")
    assert error.message.startswith("its schema cannot be used: invalid perl operator")
    assert listener.paths == []

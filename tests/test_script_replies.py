"""Lua script replies are decoded by name, in one place, and no Lua lives in Python."""

from __future__ import annotations

from pathlib import Path

import dagwright
from dagwright.models import Node
from dagwright.orchestrator.runstate.machine import Advance, Claim, Held
from dagwright.redis_scripts import named_reply

PACKAGE = Path(dagwright.__file__).parent


def test_a_claim_reply_decodes_by_name_whatever_the_order() -> None:
    spec = Node.model_validate({"id": "a", "type": "function", "function": "noop"})
    reply = [
        "inputs", ["dep", '{"x": 1}'],
        "max_concurrent_nodes", "",
        "response_cache", "1",
        "run_inputs", '{"n": 3}',
        "status", "ok",
        "checkpoint", '{"step": 2}',
        "attempt", 3,
        "deaths", 1,
        "losses", 2,
        "spec", spec.model_dump_json(),
    ]  # fmt: skip
    claim = Claim.from_reply(reply)
    assert isinstance(claim, Claim)
    assert claim.node == spec and claim.attempt == 3 and (claim.deaths, claim.losses) == (1, 2)
    assert claim.inputs == {"dep": {"x": 1}} and claim.checkpoint == {"step": 2}
    assert claim.run_max_concurrent == 0 and claim.run_response_cache
    assert claim.run_inputs == {"n": 3}
    assert Claim.from_reply(["status", "held", "holder", "host:12"]) == Held("host:12")
    assert Claim.from_reply(["status", "stale", "why", "fence"]) is None


def test_an_advance_reply_decodes_its_ready_rows() -> None:
    dispatch = '{"queue": "dw.function", "time_limit_s": 5}'
    reply = ["status", "ok", "run_finished", "", "ready", [["b", 1, dispatch]]]
    advance = Advance.from_reply("run", reply)
    assert advance is not None and advance.run_finished is None
    [ready] = advance.ready
    assert (ready.run_id, ready.node_id, ready.fence) == ("run", "b", 1)
    assert ready.dispatch.queue == "dw.function"
    assert Advance.from_reply("run", ["status", "stale"]) is None


def test_named_replies_take_names_from_clients_that_do_not_decode() -> None:
    assert named_reply([b"taken", 1]) == {"taken": 1}


def test_no_python_module_holds_lua_source() -> None:
    holding_lua = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "redis.call(" in path.read_text() or "redis.pcall(" in path.read_text()
    ]
    assert holding_lua == []


def test_every_lua_file_ships_in_the_wheel() -> None:
    import tomllib

    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["dagwright"]
    shipped = {path for glob in globs for path in PACKAGE.glob(glob)}
    assert set(PACKAGE.rglob("*.lua")) <= shipped

"""Every public method of the client and its parts, sync and async, leaves an unreachable
Redis as BrokerUnavailableError, never as redis-py's own error (issue 32): the
translation is one mechanism (``ConnectedPart``), so a method added later is covered
without remembering to wrap it. The methods are found, not listed: a new one is called
here too, with arguments made from its signature, against a port where nothing listens."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
import redis

import dagwright.client
from dagwright import AsyncClient, Client, PlanBuilder, Settings
from dagwright.client.redis_errors import TRANSLATES, ConnectedPart
from dagwright.client.tokens import Scope, TokenInfo
from dagwright.errors import BrokerUnavailableError, DagwrightError
from tests.support.api_server import free_port

ARGUMENTS: dict[str, Any] = {  # by parameter name: a value that reaches Redis
    "run_id": "run-1",
    "node_id": "a",
    "node": "a",
    "name": "nightly",
    "namespace": "team-digest",
    "entry_id": "1-0",
    "value": 1.0,
    "token": "dw_not-a-token",
    "document": {"namespace": "team-digest", "files": {"/memories/a.md": "a"}},
    "every_s": 60.0,
    "goal": "g",
    "reason": "r",
    "decision": "approve",
    "scope": "read",
    "session": "s",
    "session_id": "s",
    "token_id": "t",
    "ttl_s": 60,
    "delivery_id": "d",
}


def client_modules() -> Iterator[Any]:
    for module in pkgutil.iter_modules(dagwright.client.__path__):
        yield importlib.import_module(f"dagwright.client.{module.name}")


def client_classes() -> list[type]:
    """The classes of ``dagwright.client`` named for a client (``...Client``)."""
    return [
        member
        for module in client_modules()
        for name, member in vars(module).items()
        if inspect.isclass(member)
        and name.endswith("Client")
        and member.__module__ == module.__name__
    ]


def public_methods(cls: type) -> list[tuple[str, Callable[..., Any]]]:
    return [
        (name, member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    ]


def test_every_client_class_is_a_connected_part_with_each_public_method_translating() -> None:
    classes = client_classes()
    assert {cls.__name__ for cls in classes} >= {"Client", "AsyncClient", "MemoryClient"}
    for cls in classes:
        assert issubclass(cls, ConnectedPart), f"{cls.__name__} is no ConnectedPart"
        for name, method in public_methods(cls):
            assert getattr(method, TRANSLATES, False), f"{cls.__name__}.{name} escapes"


def arguments_of(method: Callable[..., Any]) -> dict[str, Any]:
    """Keyword arguments for ``method``'s required parameters (a plan where one is asked)."""
    given: dict[str, Any] = {}
    for parameter in inspect.signature(method).parameters.values():
        if parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
            continue
        if parameter.name == "plan":
            given["plan"] = noop_plan()
        elif parameter.name == "every_s":
            given["every_s"] = 60.0
        elif "TokenInfo" in str(parameter.annotation):
            given[parameter.name] = TokenInfo("t", "test", Scope.READ, datetime.now(UTC))
        elif parameter.default is parameter.empty:
            given[parameter.name] = ARGUMENTS[parameter.name]
    return given


def noop_plan() -> Any:
    plan = PlanBuilder("p")
    plan.function("a", "noop")
    return plan.build()


def outcome(call: Callable[[], Any]) -> str:
    """What a call did: "unreachable" (BrokerUnavailableError), "refused" (another typed
    error, before Redis), "answered"; a redis error fails the test."""
    try:
        result = call()
        if inspect.isasyncgen(result):
            asyncio.run(anext(result))
        elif inspect.iscoroutine(result):
            asyncio.run(result)
        elif isinstance(result, Iterator):
            next(result)
    except BrokerUnavailableError:
        return "unreachable"
    except redis.RedisError as exc:  # the failure this test exists for
        pytest.fail(f"a redis error escaped: {type(exc).__name__}: {exc}")
    except (DagwrightError, StopIteration, StopAsyncIteration):
        return "refused"
    return "answered"


@pytest.fixture
def dead_settings(settings: Settings) -> Settings:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    return settings.model_copy(update={"redis_url": dead, "broker_url": dead})


PARTS: dict[str, Callable[[Client, AsyncClient], ConnectedPart]] = {
    "Client": lambda client, _: client,
    "DeadLetterClient": lambda client, _: client.dlq,
    "ScheduleClient": lambda client, _: client.schedules,
    "ApprovalClient": lambda client, _: client.approvals,
    "TokenClient": lambda client, _: client.tokens,
    "WebhookClient": lambda client, _: client.webhooks,
    "MemoryClient": lambda client, _: client.memory,
    "AsyncClient": lambda _, async_client: async_client,
    "AsyncMemoryClient": lambda _, async_client: async_client.memory,
}
"""How to reach each client class from a Client and an AsyncClient."""


def test_every_public_method_says_redis_is_unreachable(dead_settings: Settings) -> None:
    classes = {cls.__name__: cls for cls in client_classes() if public_methods(cls)}
    assert set(PARTS) == set(classes), "a new client class: say here how to reach it"
    client = Client(dead_settings)

    def call(part_name: str, method_name: str) -> str:
        # a fresh AsyncClient per call: its pool belongs to the loop it is first used on
        part = PARTS[part_name](client, AsyncClient(dead_settings))
        method = getattr(part, method_name)
        return outcome(partial(method, **arguments_of(method)))

    calls = [(part, name) for part, cls in classes.items() for name, _ in public_methods(cls)]
    # in threads: each refused connection is retried for ~3 s (connection.client_options)
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        said = dict(zip(calls, pool.map(lambda pair: call(*pair), calls), strict=True))
    outcomes = {f"{part}.{name}": what for (part, name), what in said.items()}
    unreachable = [name for name, what in outcomes.items() if what == "unreachable"]
    assert len(unreachable) >= 0.8 * len(outcomes), outcomes
    for name in ("Client.submit", "AsyncClient.submit", "MemoryClient.list", "AsyncClient.events"):
        assert outcomes[name] == "unreachable", outcomes

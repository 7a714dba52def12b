"""Strict submit options: a keyword ``RunOptions`` does not name (a typo, a Celery word)
or a scalar of the wrong type is refused before anything is written, by ``Client.submit``,
``Client.run_request`` and ``AsyncClient.submit`` alike, and an unknown field of the API's
submit body is a 422 naming it; valid options still run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dagwright import AsyncClient, Client, Plan, PlanBuilder, Settings
from dagwright.client.run_options import RUN_OPTION_NAMES
from dagwright.errors import InputError, RunOptionError
from dagwright.server.routes.runs import SubmitRequest
from tests.support.api_server import ApiServer

pytestmark = pytest.mark.usefixtures("worker")


def greeting() -> Plan:
    plan = PlanBuilder("Greet")
    plan.function("hello", "concat", params={"parts": ["hello"]})
    return plan.build()


def test_a_misspelt_keyword_to_submit_names_the_nearest_and_writes_nothing(
    client: Client,
) -> None:
    with pytest.raises(TypeError) as raised:
        client.submit(greeting(), timeout=2)  # type: ignore[call-arg]
    assert str(raised.value) == (
        "Client.submit() got an unexpected keyword argument 'timeout'; did you mean 'timeout_s'?"
    )
    assert isinstance(raised.value, RunOptionError) and isinstance(raised.value, InputError)
    assert client.find_runs().runs == []


def test_run_request_refuses_an_unknown_keyword_too(client: Client) -> None:
    with pytest.raises(RunOptionError, match=r"^Client\.run_request\(\) .* 'max_node'; "):
        client.run_request(greeting(), max_node=3)  # type: ignore[call-arg]


async def submit_async(settings: Settings, **options: Any) -> None:
    async with AsyncClient(settings) as client:
        await client.submit(greeting(), **options)


@pytest.mark.parametrize("key", [None, "k-1"], ids=["plain", "keyed"])
def test_async_submit_refuses_an_unknown_keyword(
    settings: Settings, client: Client, key: str | None
) -> None:
    with pytest.raises(TypeError, match=r"^AsyncClient\.submit\(\) .* 'inpts'; did you mean"):
        asyncio.run(submit_async(settings, idempotency_key=key, inpts={"name": "Ada"}))
    assert client.find_runs().runs == []


@pytest.mark.parametrize(
    ("word", "hint"),
    [
        ("eta", "use not_before="),
        ("countdown", "use countdown_s="),
        ("expires", "timeout_s limits"),
        ("queue", "worker type's queue"),
        ("link", "webhooks="),
    ],
)
def test_a_celery_word_says_what_dagwright_offers_instead(
    client: Client, word: str, hint: str
) -> None:
    with pytest.raises(RunOptionError) as raised:
        client.submit(greeting(), **{word: 5})
    line = str(raised.value)
    assert line.startswith(f"Client.submit() got an unexpected keyword argument {word!r}; ")
    assert hint in line and "\n" not in line


def test_every_unknown_keyword_is_named(client: Client) -> None:
    with pytest.raises(
        RunOptionError, match=r"'timeout'; did you mean 'timeout_s'\? \(and 'eta'\)$"
    ):
        client.submit(greeting(), timeout=2, eta=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("llm_batch", "false", "must be bool, not str"),  # truthy: a 24-hour batch run
        ("response_cache", "no", "must be bool or None, not str"),
        ("timeout_s", "30", "must be float or None, not str"),
        ("max_concurrent_nodes", True, "must be int or None, not bool"),
    ],
)
def test_a_scalar_option_of_the_wrong_type_is_refused(
    client: Client, option: str, value: object, expected: str
) -> None:
    with pytest.raises(RunOptionError) as raised:
        client.submit(greeting(), **{option: value})
    assert str(raised.value) == f"Client.submit() argument {option!r} {expected}"
    assert client.find_runs().runs == []


def test_valid_options_still_run(client: Client) -> None:
    run = client.submit(
        greeting(),
        timeout_s=60,
        max_concurrent_nodes=1,
        response_cache=False,
        llm_batch=False,
        inputs=None,
        webhooks=(),
    )
    assert run.result(timeout=60) == "hello"


def test_an_unknown_field_of_the_api_submit_body_is_a_422_naming_it(api: ApiServer) -> None:
    with api.http("operate") as http:
        typo = http.post("/api/v1/runs", json={"plan": {"goal": "g", "nodes": []}, "timeout": 2})
        celery = http.post("/api/v1/runs", json={"goal": "g", "countdown": 10})
    assert typo.status_code == 422 and celery.status_code == 422
    assert typo.headers["content-type"] == "application/problem+json"
    assert typo.json()["detail"] == "unknown field 'timeout'; did you mean 'timeout_s'?"
    assert "'countdown'; use countdown_s= (seconds)" in celery.json()["detail"]
    assert api.client.find_runs().runs == []


def test_the_api_submit_body_holds_only_submit_options() -> None:
    """Its fields go to ``Client.submit`` as keywords: one it does not take would be
    refused there, as the caller's mistake, for the server's."""
    fields = set(SubmitRequest.model_fields) - {"plan", "idempotency_key"}
    assert fields <= RUN_OPTION_NAMES


def test_the_line_stays_short_whatever_the_names(api: ApiServer) -> None:
    body = {"goal": "g", "x" * 10_000: 1, **{f"field{n}": n for n in range(1_000)}}
    with api.http("operate") as http:
        detail = http.post("/api/v1/runs", json=body).json()["detail"]
    assert detail.startswith("unknown field 'xxx") and detail.endswith(", 995 more)")
    assert len(detail) < 300

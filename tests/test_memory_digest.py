"""Memory across scheduled runs, with real worker processes and the strict fake: the
example digest (examples/memory_digest/) reports the releases on its first run, records
them in its schedule's namespace, and its next run reads them back and reports nothing
again."""

from __future__ import annotations

import tomllib
from pathlib import Path

from dagwright import Client, Settings
from dagwright.keys import Keys
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import Script
from tests.support.processes import Workers

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/memory_digest"


def test_the_next_scheduled_run_reads_what_the_first_wrote_and_leaves_it_out(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    config = tomllib.loads((EXAMPLE / "dagwright.toml").read_text())
    settings = subprocess_settings.model_copy(
        update={"agent_memory": Settings(**config).memory.agent_memory}
    )
    fake_llm.add(*Script.load(EXAMPLE / "fake-llm.yaml").entries)
    workers.start(settings)
    client = Client(settings)
    client.schedules.add("digest", every_s=86_400, plan=EXAMPLE / "plan.yaml")

    first = client.wait(client.schedules.run_now("digest").run_id, timeout=60)
    second = client.wait(client.schedules.run_now("digest").run_id, timeout=60)
    assert first.result == "New releases: valkey 8.1, celery 5.5.", workers[0].log_tail()
    assert second.result.startswith("Nothing new: valkey 8.1 and celery 5.5 were reported")

    keys = Keys(settings.redis.key_prefix)
    files = client.runtime.client.hgetall(keys.memory_files("schedule:digest"))
    assert files == {"/memories/reported.md": "- valkey 8.1\n- celery 5.5\n"}
    read = [
        (span.attributes["namespace"], span.attributes["command"], span.attributes["path"])
        for span in client.trace(second.run_id).spans
        if span.name == "memory.command"
    ]
    assert read == [
        ("schedule:digest", "view", "/memories"),
        ("schedule:digest", "view", "/memories/reported.md"),
    ]

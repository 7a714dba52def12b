"""Memory namespaces in real Valkey: the six commands with the API's result texts, the
path rules, the limits, redaction, retention, and a write applied once per call."""

from __future__ import annotations

import json

import pytest
import redis
from pydantic import SecretStr

from dagwright import Settings
from dagwright.errors import NodeLostError, ToolError
from dagwright.keys import Keys
from dagwright.memory.commands import MemoryCommand, run_command
from dagwright.memory.paths import memory_path
from dagwright.memory.store import CallRef, MemoryStore, NodeMemory

RUN, NODE, FENCE = "r-mem", "digest", 3


@pytest.fixture
def store(settings: Settings, redis_client: redis.Redis) -> MemoryStore:
    keys = Keys(settings.redis.key_prefix)
    redis_client.hset(keys.run_key(RUN, "state"), NODE, "running")
    redis_client.hset(keys.run_key(RUN, "fence"), NODE, str(FENCE))
    return MemoryStore(redis_client, keys, settings)


def memory(store: MemoryStore, namespace: str = "team", read_only: bool = False) -> NodeMemory:
    return NodeMemory(store, namespace, read_only=read_only)


def call(tool_use_id: str) -> CallRef:
    return CallRef(RUN, NODE, FENCE, tool_use_id)


def cmd(**fields: object) -> MemoryCommand:
    return MemoryCommand.model_validate(fields)


def test_the_six_commands_answer_with_the_documented_texts(store: MemoryStore) -> None:
    mem = memory(store)
    created = mem.run(
        cmd(command="create", path="/memories/notes.md", file_text="a\nb\n"), call("t1")
    )
    assert created == "File created successfully at: /memories/notes.md"
    shown = mem.run(cmd(command="view", path="/memories/notes.md"), call("t2"))
    assert (
        shown == "Here's the content of /memories/notes.md with line numbers:\n"
        "     1\ta\n     2\tb\n     3\t"
    )
    edited = mem.run(
        cmd(command="str_replace", path="/memories/notes.md", old_str="b", new_str="B"), call("t3")
    )
    assert edited.startswith(
        "The memory file has been edited. Here is the snippet showing the change"
    )
    assert "     2\tB" in edited
    inserted = mem.run(
        cmd(command="insert", path="/memories/notes.md", insert_line=0, insert_text="top"),
        call("t4"),
    )
    assert inserted == "The file /memories/notes.md has been edited."
    renamed = mem.run(
        cmd(command="rename", old_path="/memories/notes.md", new_path="/memories/old/notes.md"),
        call("t5"),
    )
    assert renamed == "Successfully renamed /memories/notes.md to /memories/old/notes.md"
    listing = mem.run(cmd(command="view", path="/memories"), call("t6"))
    assert listing.splitlines() == [
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:",
        "8B\t/memories",
        "8B\t/memories/old/",
        "8B\t/memories/old/notes.md",
    ]
    assert store.snapshot("team").files == {"/memories/old/notes.md": "top\na\nB\n"}
    deleted = mem.run(cmd(command="delete", path="/memories/old"), call("t7"))
    assert deleted == "Successfully deleted /memories/old"
    assert store.snapshot("team").files == {}


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        (
            {"command": "view", "path": "/memories/none"},
            "does not exist. Please provide a valid path.",
        ),
        (
            {"command": "str_replace", "path": "/memories/a", "old_str": "zz", "new_str": ""},
            "did not appear verbatim",
        ),
        (
            {"command": "str_replace", "path": "/memories/a", "old_str": "x", "new_str": "y"},
            "Multiple occurrences of old_str `x` in lines: 1, 2",
        ),
        (
            {"command": "insert", "path": "/memories/a", "insert_line": 9, "insert_text": "t"},
            "It should be within the range [0, 2].",
        ),
        (
            {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/a"},
            "already exists",
        ),
        (
            {"command": "delete", "path": "/memories"},
            "Cannot delete the /memories directory itself",
        ),
        (
            {"command": "create", "path": "/memories/a/b", "file_text": ""},
            "is a file, not a directory",
        ),
        ({"command": "create", "path": "/memories/x"}, "the create command needs file_text"),
    ],
)
def test_a_command_that_cannot_be_done_says_why(fields: dict[str, object], said: str) -> None:
    with pytest.raises(ToolError, match=None) as refused:
        run_command(cmd(**fields), {"/memories/a": "x\nx"})
    assert said in str(refused.value)


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "/memories/../etc",
        "/memories/a/../../x",
        "memories/a",
        "/memoriesx/a",
        "/memories/a\x00",
    ],
)
def test_a_path_outside_memories_is_refused(path: str) -> None:
    with pytest.raises(ToolError):
        memory_path(path)


def test_paths_are_normalised() -> None:
    assert memory_path("/memories//a///b/") == "/memories/a/b"
    assert memory_path("/memories/") == "/memories"


def test_a_write_past_a_limit_is_refused_and_nothing_is_written(
    settings: Settings, redis_client: redis.Redis
) -> None:
    small = settings.model_copy(
        update={
            "memory_max_file_bytes": 10,
            "memory_max_files": 2,
            "memory_max_namespace_bytes": 15,
        }
    )
    keys = Keys(settings.redis.key_prefix)
    redis_client.hset(keys.run_key(RUN, "state"), NODE, "running")
    redis_client.hset(keys.run_key(RUN, "fence"), NODE, str(FENCE))
    mem = memory(MemoryStore(redis_client, keys, small))
    with pytest.raises(ToolError, match="more than the limit of 10 per memory file"):
        mem.run(cmd(command="create", path="/memories/big", file_text="x" * 11), call("a"))
    mem.run(cmd(command="create", path="/memories/one", file_text="x" * 8), call("b"))
    with pytest.raises(ToolError, match="more than the limit of 15"):
        mem.run(cmd(command="create", path="/memories/two", file_text="x" * 8), call("c"))
    mem.run(cmd(command="create", path="/memories/two", file_text="x"), call("d"))
    with pytest.raises(ToolError, match="3 files, more than the limit of 2"):
        mem.run(cmd(command="create", path="/memories/three", file_text=""), call("e"))
    assert sorted(mem.store.snapshot("team").files) == ["/memories/one", "/memories/two"]


def test_a_secret_is_masked_before_it_is_stored(
    settings: Settings, redis_client: redis.Redis
) -> None:
    secret = "sk-ant-api03-" + "s3cr3t" * 8
    keyed = settings.model_copy(update={"anthropic_api_key": SecretStr(secret)})
    keys = Keys(settings.redis.key_prefix)
    redis_client.hset(keys.run_key(RUN, "state"), NODE, "running")
    redis_client.hset(keys.run_key(RUN, "fence"), NODE, str(FENCE))
    store = MemoryStore(redis_client, keys, keyed)
    answer = memory(store).run(
        cmd(command="create", path="/memories/k", file_text=f"key={secret}"), call("s")
    )
    stored = str(redis_client.hget(keys.memory_files("team"), "/memories/k"))
    assert secret not in stored and stored.startswith("key=")
    assert secret not in json.dumps(store.writes_of_run(RUN)) and secret not in answer


def test_a_read_only_namespace_refuses_writes_and_allows_views(store: MemoryStore) -> None:
    memory(store).run(cmd(command="create", path="/memories/a", file_text="kept"), call("w"))
    reader = memory(store, read_only=True)
    with pytest.raises(ToolError, match="read-only for this agent: delete was refused"):
        reader.run(cmd(command="delete", path="/memories/a"), call("x"))
    assert "kept" in reader.run(cmd(command="view", path="/memories/a"), call("y"))


def test_a_write_is_applied_once_per_call(store: MemoryStore) -> None:
    mem = memory(store)
    mem.run(cmd(command="create", path="/memories/log", file_text="1\n"), call("c"))
    insert = cmd(command="insert", path="/memories/log", insert_line=1, insert_text="2")
    first = mem.run(insert, call("i"))
    again = mem.run(insert, call("i"))  # the same tool_use answered again (a resumed node)
    assert again == first
    assert store.snapshot("team").files["/memories/log"] == "1\n2\n"
    assert set(store.writes_of_run(RUN)) == {f"{NODE}/c", f"{NODE}/i"}


def test_a_worker_that_lost_its_node_writes_nothing(
    store: MemoryStore, redis_client: redis.Redis
) -> None:
    redis_client.hset(store.keys.run_key(RUN, "fence"), NODE, str(FENCE + 1))  # taken over
    with pytest.raises(NodeLostError):
        memory(store).run(cmd(command="create", path="/memories/z", file_text="zombie"), call("z"))
    assert store.snapshot("team").files == {}


def test_a_namespace_expires_after_its_retention(
    store: MemoryStore, redis_client: redis.Redis
) -> None:
    store.settings = store.settings.model_copy(
        update={"memory_namespace_retention_s": {"short": 120.0}}
    )
    memory(store, "short").run(cmd(command="create", path="/memories/a", file_text="x"), call("r"))
    assert 0 < redis_client.ttl(store.keys.memory_files("short")) <= 120
    assert redis_client.ttl(store.keys.memory_meta("team")) == -2  # never written
    assert [info.name for info in store.namespaces()] == ["short"]
    redis_client.delete(
        store.keys.memory_files("short"), store.keys.memory_meta("short")
    )  # as expiry does
    assert store.namespaces() == []

"""``dagwright memory ls|show|rm|export|import`` (the real command, in a subprocess) and
``client.memory``: 80 columns, --json, exit 2 with one line on bad input."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis

from dagwright import AsyncClient, Client, Settings
from dagwright.errors import InputError
from tests.support.cli import cli_env, dagwright, json_out, one_error_line


def test_a_namespace_exported_imports_elsewhere_masked_and_is_removed(
    client: Client, settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path, COLUMNS="80")
    document = {
        "format": "dagwright.memory/1",
        "namespace": "x",
        "files": {"/memories/a.md": "alpha\n"},
    }
    source = tmp_path / "export.json"
    source.write_text(json.dumps(document))
    imported = dagwright("memory", "import", "team-notes", str(source), env=env)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "imported 1 file(s) into team-notes"

    listed = dagwright("memory", "ls", env=env)
    assert listed.returncode == 0 and "team-notes" in listed.stdout
    assert all(len(line) <= 80 for line in listed.stdout.splitlines())
    assert json_out(dagwright("memory", "ls", "--json", env=env))[0]["name"] == "team-notes"
    shown = dagwright("memory", "show", "team-notes", "--json", env=env)
    assert json_out(shown) == {"/memories/a.md": "alpha\n"}
    exported = json_out(dagwright("memory", "export", "team-notes", env=env))
    assert exported == {**document, "namespace": "team-notes"}

    removed = dagwright("memory", "rm", "team-notes", env=env)
    assert removed.returncode == 0 and client.memory.list() == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("show", "Bad Name"), "is no memory namespace"),
        (("show", "nobody"), "no memory namespace 'nobody'"),
        (("rm", "nobody"), "no memory namespace 'nobody'"),
        (("import", "team", "missing.json"), "cannot read missing.json"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    result = dagwright("memory", *args, env=cli_env(settings, tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert said in one_error_line(result)


def test_an_import_is_checked_before_anything_is_written(client: Client) -> None:
    escape = {"format": "dagwright.memory/1", "namespace": "t", "files": {"/etc/passwd": "x"}}
    with pytest.raises(InputError, match="outside /memories"):
        client.memory.import_("team", escape)
    with pytest.raises(InputError, match="not a memory export"):
        client.memory.import_("team", {"files": [], "namespace": "t"})
    assert client.memory.list() == []


def test_the_async_client_reads_and_changes_memory(client: Client, settings: Settings) -> None:
    asyncio.run(async_memory(settings))


async def async_memory(settings: Settings) -> None:
    async with AsyncClient(settings) as aclient:
        await aclient.memory.import_("async-notes", {"files": {"/memories/n": "note"}})
        assert [info.name for info in await aclient.memory.list()] == ["async-notes"]
        assert await aclient.memory.show("async-notes") == {"/memories/n": "note"}
        await aclient.memory.remove("async-notes")
        with pytest.raises(InputError, match="no memory namespace 'async-notes'"):
            await aclient.memory.show("async-notes")

"""``client.memory``: the memory namespaces of the deployment (what agents offered the
memory tool keep across runs): list, show, remove, export and import them, and the
memory writes of one run."""

from __future__ import annotations

import asyncio
import builtins
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from dagwright.client.redis_errors import ConnectedPart
from dagwright.errors import InputError, ToolError, UnknownMemoryError
from dagwright.memory.namespaces import checked_name
from dagwright.memory.store import MemoryStore, NamespaceInfo

if TYPE_CHECKING:
    from dagwright.client.runs import Client

EXPORT_FORMAT = "dagwright.memory/1"


class MemoryExport(BaseModel):
    """A namespace's files as ``export`` writes them and ``import_`` reads them (JSON)."""

    model_config = ConfigDict(extra="forbid")

    format: str = EXPORT_FORMAT
    namespace: str = ""
    """The namespace it was exported from (an import may name another)."""
    files: dict[str, str]


class MemoryClient(ConnectedPart):
    """The memory namespaces (``dagwright memory``; docs/memory.md)."""

    def __init__(self, client: Client) -> None:
        self.redis_url = client.redis_url
        runtime = client.runtime
        self._store = MemoryStore(runtime.client, runtime.keys, runtime.settings)

    def list(self) -> builtins.list[NamespaceInfo]:
        """Every namespace held, the last written first."""
        return self._store.namespaces()

    def show(self, namespace: str) -> dict[str, str]:
        """The files of ``namespace`` (path -> text); InputError if it holds nothing."""
        files = self._store.snapshot(checked_name(namespace)).files
        if not files and self._store.info(namespace) is None:
            raise UnknownMemoryError(namespace)
        return dict(sorted(files.items()))

    def remove(self, namespace: str) -> None:
        """Forget ``namespace`` whole; UnknownMemoryError if there was none."""
        if not self._store.remove(checked_name(namespace)):
            raise UnknownMemoryError(namespace)

    def export(self, namespace: str) -> MemoryExport:
        """``namespace`` as a document ``import_`` takes back."""
        return MemoryExport(namespace=namespace, files=self.show(namespace))

    def import_(self, namespace: str, document: dict[str, Any] | MemoryExport) -> int:
        """Make ``namespace`` hold exactly the files of ``document`` (an export, of this
        namespace or another): paths checked, secrets masked, within the limits
        (InputError otherwise, nothing written). How many files it holds then."""
        name = checked_name(namespace)
        try:
            export = MemoryExport.model_validate(document)
            if export.format != EXPORT_FORMAT:
                raise InputError(f"not a memory export: format {export.format!r}")
            return self._store.replace(name, export.files)
        except ToolError as exc:
            raise InputError(f"cannot import into {name!r}: {exc}") from None
        except ValueError as exc:  # pydantic's ValidationError
            raise InputError(
                f"not a memory export ({EXPORT_FORMAT}): {exc}".splitlines()[0]
            ) from None

    def writes(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The memory writes of ``run_id``'s nodes: ``<node>/<tool_use_id>`` -> what was
        written (namespace, command, paths, result)."""
        return self._store.writes_of_run(run_id)


class AsyncMemoryClient(ConnectedPart):
    """``MemoryClient`` for asyncio (``AsyncClient.memory``): each call in a thread."""

    def __init__(self, sync: MemoryClient) -> None:
        self.sync = sync
        self.redis_url = sync.redis_url

    async def list(self) -> builtins.list[NamespaceInfo]:
        return await asyncio.to_thread(self.sync.list)

    async def show(self, namespace: str) -> dict[str, str]:
        return await asyncio.to_thread(self.sync.show, namespace)

    async def remove(self, namespace: str) -> None:
        await asyncio.to_thread(self.sync.remove, namespace)

    async def export(self, namespace: str) -> MemoryExport:
        return await asyncio.to_thread(self.sync.export, namespace)

    async def import_(self, namespace: str, document: dict[str, Any] | MemoryExport) -> int:
        return await asyncio.to_thread(self.sync.import_, namespace, document)

    async def writes(self, run_id: str) -> dict[str, dict[str, Any]]:
        return await asyncio.to_thread(self.sync.writes, run_id)

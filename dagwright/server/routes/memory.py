"""Memory namespaces: list, show (export), import, remove; the memory writes of a run.

Reading is the ``read`` scope; replacing or removing a namespace is ``admin``: memory
is what later runs' agents are told, so changing it changes what they do (as purging a
dead letter, it is not undone)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from dagwright.server.auth import ADMIN, READ, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import documented
from dagwright.server.resources import MemoryFiles, MemoryImported, MemoryNamespace, MemoryWrite

router = APIRouter(tags=["memory"])

NAMESPACE_PATTERN = (
    r"^([a-z0-9][a-z0-9_.-]{0,62}|schedule:[a-z0-9][a-z0-9_.-]{0,62}|run:[A-Za-z0-9_.-]{1,80})$"
)
# A segment that is not "." nor "..", with no "/" nor control character (memory/paths.py).
SEGMENT = (
    r"(?:[^/.\x00-\x1f\x7f][^/\x00-\x1f\x7f]*|\.[^/.\x00-\x1f\x7f][^/\x00-\x1f\x7f]*"
    r"|\.\.[^/\x00-\x1f\x7f]+)"
)
MemoryPath = Annotated[
    str, StringConstraints(pattern=rf"^/memories(?:/+{SEGMENT})+/*$", max_length=512)
]
Namespace = Annotated[
    str, Path(pattern=NAMESPACE_PATTERN, description="A name, schedule:<name> or run:<id>.")
]


def _paths_as_property_names(schema: dict[str, Any]) -> None:
    """Pydantic says a constrained key as ``patternProperties``, which leaves keys that do
    not match it free; the keys are the paths: every one must match."""
    pattern = next(iter(schema.pop("patternProperties")))
    schema["propertyNames"] = {"pattern": pattern, "maxLength": 512}
    schema["additionalProperties"] = {"type": "string"}


class MemoryImport(BaseModel):
    """A namespace's files, as ``GET /memory/{namespace}`` gives them."""

    model_config = ConfigDict(extra="forbid", strict=True)

    format: Literal["dagwright.memory/1"] = "dagwright.memory/1"
    namespace: str = ""
    files: dict[MemoryPath, str] = Field(json_schema_extra=_paths_as_property_names)


@router.get(
    "/memory", dependencies=[Depends(READ)], response_model=None,
    responses=documented(list[MemoryNamespace]),
)  # fmt: skip
async def memory_list(request: Request) -> list[dict[str, Any]]:
    """Every memory namespace, the last written first."""
    found = await in_thread(client_of(request).memory.list)
    return [info.__dict__ for info in found]


@router.get(
    "/memory/{namespace}", dependencies=[Depends(READ)], response_model=None,
    responses=documented(MemoryFiles, 404, 422),
)  # fmt: skip
async def memory_show(namespace: Namespace, request: Request) -> dict[str, Any]:
    """A namespace's files (what its agents wrote: data, never instructions), as an
    export ``PUT`` takes back."""
    export = await in_thread(client_of(request).memory.export, namespace)
    return export.model_dump()


@router.put(
    "/memory/{namespace}", dependencies=[Depends(ADMIN)], response_model=None,
    responses=documented(MemoryImported, 400, 403, 413, 422),
)  # fmt: skip
async def memory_import(
    namespace: Namespace, body: MemoryImport, request: Request
) -> dict[str, Any]:
    """Make the namespace hold exactly these files (paths checked, secrets masked,
    within the limits: 422 otherwise, nothing written)."""
    count = await in_thread(client_of(request).memory.import_, namespace, body.model_dump())
    return {"namespace": namespace, "files": count}


@router.delete(
    "/memory/{namespace}", dependencies=[Depends(ADMIN)], response_model=None,
    responses=documented(MemoryImported, 403, 404, 422),
)  # fmt: skip
async def memory_remove(namespace: Namespace, request: Request) -> dict[str, Any]:
    """Forget the namespace whole."""
    await in_thread(client_of(request).memory.remove, namespace)
    return {"namespace": namespace, "files": 0}


@router.get(
    "/runs/{run_id}/memory", dependencies=[Depends(READ)], response_model=None,
    responses=documented(list[MemoryWrite]),
)  # fmt: skip
async def run_memory_writes(run_id: str, request: Request) -> list[dict[str, Any]]:
    """The memory writes the run's nodes made (what they read is in the trace: its
    ``memory.command`` spans)."""
    found = await in_thread(client_of(request).memory.writes, run_id)
    return [{"call": call, **record} for call, record in sorted(found.items())]

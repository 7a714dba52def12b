"""What a worker can run, as it publishes it with its presence.

A submitting client validates a plan against its own registry, which need not be the
workers': ``dagwright run plan.yaml -I mymodule`` against ``dagwright up`` imports
``mymodule`` in the client only, and the plan's nodes would be dead-lettered one by one
("not registered in this worker"). So each worker publishes, every few seconds, the
worker types it serves, the functions it has registered, the modules it imported and
whether it can reach an LLM (how, never the key), and a submit checks a plan against the
live workers' (``orchestrator/control/runnable.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from dagwright.settings import LLMSettings, Settings
from dagwright.workers.registry import WorkerRegistry

# Kinds of worker type whose nodes call an LLM: their worker needs an endpoint configured.
LLM_KINDS = frozenset({"agent", "planner"})


def llm_endpoint(settings: LLMSettings) -> str:
    """How this process reaches the models ("" if it cannot): the key itself is never told.
    Bedrock and Vertex AI find their credentials where their SDKs look, unseen from here."""
    if settings.provider != "anthropic":
        return settings.provider
    if settings.api_key is not None and settings.api_key.get_secret_value():
        return "anthropic api key"
    if settings.base_url:
        return "ANTHROPIC_BASE_URL"
    return ""


def llm_assignment(settings: LLMSettings) -> str:
    """The variable assignments to start workers with to reach the models as this process
    does (``ANTHROPIC_BASE_URL=<url>``; a key is never written out, only its name and a
    placeholder), space-separated; "" if this process cannot reach them either, or uses
    another provider."""
    from dagwright.connection import redact_url

    if settings.provider != "anthropic":
        return ""
    assignments = []
    if settings.api_key is not None and settings.api_key.get_secret_value():
        assignments.append("ANTHROPIC_API_KEY=sk-ant-...")
    if settings.base_url:
        assignments.append(f"ANTHROPIC_BASE_URL={redact_url(settings.base_url)}")
    return " ".join(assignments)


@dataclass(frozen=True)
class WorkerCapabilities:
    """What one worker can run: a node needs a live worker whose capabilities cover it."""

    worker_types: frozenset[str]
    """The worker types whose queue it consumes (``planner`` for the orchestrator queue),
    and ``function:<queue>`` for each function queue it consumes."""
    functions: frozenset[str]
    """The functions ``function`` nodes may call in it (when it serves ``function``)."""
    imports: tuple[str, ...]
    """The modules it imported (``--import`` / ``DAGWRIGHT_IMPORTS``)."""
    llm: str
    """How it reaches the models (see ``llm_endpoint``); "" if it cannot."""
    queues: frozenset[str] = frozenset()
    """The Celery queues it consumes."""
    slots: int = 0
    """How many nodes it runs at once (its pool's processes); 0 if unknown."""
    pulls: bool = False
    """Whether it pulls pooled nodes as it finishes nodes (``eager_dispatch``; see
    orchestrator/execution/pool.py)."""
    broker: str = ""
    """Which broker it consumes from, without credentials (``app.broker_identity``): a
    client publishing to another one sends it nothing (``doctor`` warns); "" if untold."""
    function_queues: tuple[tuple[str, str], ...] = ()
    """(function, queue) for each of its functions declared with its own ``queue=``: a
    client that has not imported the function routes its nodes by this
    (``orchestrator/control/live_registry.py``)."""

    @classmethod
    def of(
        cls,
        registry: WorkerRegistry,
        settings: Settings,
        queues: Iterable[str],
        slots: int = 0,
        broker: str = "",
    ) -> WorkerCapabilities:
        """The capabilities of a worker built from ``registry``, consuming ``queues`` of
        ``broker`` with ``slots`` processes."""
        consumed = set(queues)
        types = registry.types(include_internal=True)
        queue_types = registry.served_queues().items()
        return cls(
            worker_types=frozenset(
                {wt.name for wt in types if wt.queue in consumed}
                | {name for name, queue in queue_types if queue in consumed}
            ),
            functions=frozenset(registry.functions.names()),
            imports=tuple(settings.process.imports),
            llm=llm_endpoint(settings.llm),
            queues=frozenset(consumed),
            slots=slots,
            pulls=settings.dispatch.eager_dispatch,
            broker=broker,
            function_queues=tuple(
                (name, queue)
                for queue, names in registry.functions.queues().items()
                for name in names
            ),
        )

    def runs(self, worker_type: str, *, function: str | None = None, llm: bool = False) -> bool:
        """Whether a node of ``worker_type`` (calling ``function``, needing an LLM) can run here."""
        return (
            worker_type in self.worker_types
            and (function is None or function in self.functions)
            and (not llm or bool(self.llm))
        )

    def to_json(self, expires_at: float) -> str:
        """The entry of the workers' capabilities hash, valid until ``expires_at`` (epoch s)."""
        return json.dumps(
            {
                "worker_types": sorted(self.worker_types),
                "functions": sorted(self.functions),
                "imports": list(self.imports),
                "llm": self.llm,
                "queues": sorted(self.queues),
                "slots": self.slots,
                "pulls": self.pulls,
                "broker": self.broker,
                "function_queues": dict(self.function_queues),
                "expires_at": expires_at,
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> tuple[WorkerCapabilities, float]:
        """An entry of the hash: the capabilities and until when they hold (epoch s)."""
        entry = json.loads(raw)
        capabilities = cls(
            worker_types=frozenset(entry.get("worker_types", [])),
            functions=frozenset(entry.get("functions", [])),
            imports=tuple(entry.get("imports", [])),
            llm=str(entry.get("llm", "")),
            queues=frozenset(entry.get("queues", [])),
            slots=int(entry.get("slots", 0)),
            pulls=bool(entry.get("pulls", False)),
            broker=str(entry.get("broker", "")),
            function_queues=tuple(sorted(dict(entry.get("function_queues", {})).items())),
        )
        return capabilities, float(entry.get("expires_at", 0))

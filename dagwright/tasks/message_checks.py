"""What a task message on a ``dw.*`` queue must look like before Celery reads it.

Celery reads a task message in the worker's main process (``[args, kwargs, embed] =
body``), and takes any error doing so for the end of the world: the process exits, the
message goes back to its queue, and the next worker to take it dies in turn. So the
consumer (``tasks/consumer.py``) asks ``malformation`` first; this module only says what
is wrong, in words that never quote the body (it may hold anything, secrets included).

What passes: Celery's message protocol 2, as ``send_task`` writes it for a dagwright task
(JSON, UTF-8, uncompressed, ``[args, kwargs, embed]`` with no callbacks), whose arguments
fit that task's signature with their JSON types. Nothing else is ever sent by dagwright.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dagwright.dlq import RawMessage
from dagwright.keys import NODE_EXECUTE_TASK, PLAN_TASK, RECONCILE_TASK, SCHEDULE_FIRE_TASK

# A node's message is ~200 bytes; a body this large is not one, and is not parsed.
MAX_BODY_BYTES = 64 * 1024
JSON_CONTENT_TYPE = "application/json"
EMBED_KEYS = frozenset({"callbacks", "errbacks", "chain", "chord"})
LABEL_CHARS = 100  # of a content type or encoding kept in a dead letter or a log line


@dataclass(frozen=True)
class TaskArguments:
    """The arguments a dagwright task takes, with their JSON types."""

    required: tuple[tuple[str, type], ...]
    optional: tuple[tuple[str, type], ...] = ()  # each may also be null

    def fit(self, args: list[Any], kwargs: dict[str, Any]) -> bool:
        """Whether ``task(*args, **kwargs)`` binds, every value of its declared type."""
        types = dict(self.required + self.optional)
        if len(args) > len(types):
            return False
        given = dict(zip(types, args, strict=False))
        if given.keys() & kwargs.keys() or kwargs.keys() - types.keys():
            return False
        given.update(kwargs)
        if any(name not in given for name, _ in self.required):
            return False
        optional = dict(self.optional)
        return all(
            (value is None and name in optional) or is_json_type(value, types[name])
            for name, value in given.items()
        )

    def describe(self, task: str) -> str:
        names = [name for name, _ in self.required] + [f"{n}=None" for n, _ in self.optional]
        return f"{task}({', '.join(names)})"


NODE_ARGUMENTS = TaskArguments((("run_id", str), ("node_id", str), ("fence", int)))
TASK_ARGUMENTS: dict[str, TaskArguments] = {
    NODE_EXECUTE_TASK: NODE_ARGUMENTS,
    PLAN_TASK: NODE_ARGUMENTS,
    RECONCILE_TASK: TaskArguments(()),
    SCHEDULE_FIRE_TASK: TaskArguments((("name", str),), (("tick", str),)),
}


def is_json_type(value: object, expected: type) -> bool:
    if expected is int:  # JSON has no booleans-as-numbers; Python's bool is an int
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


@dataclass(frozen=True)
class DeliveredMessage:
    """What the consumer holds of a message before Celery reads it (a kombu Message's
    parts, any of which a hostile writer may have set to anything)."""

    queue: str
    headers: object
    content_type: object
    content_encoding: object
    body: object

    def raw(self) -> RawMessage:
        """What a dead letter may keep of it: labels and size, never the body."""
        return RawMessage(
            queue=self.queue,
            content_type=label(self.content_type),
            content_encoding=label(self.content_encoding),
            body_bytes=body_size(self.body),
        )


def label(value: object) -> str:
    """A header value fit for one log line: printable, short, and only if it is text."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return f"<{type(value).__name__}>"
    return value.encode("ascii", "backslashreplace").decode()[:LABEL_CHARS]


def body_size(body: object) -> int:
    if isinstance(body, bytes | bytearray):
        return len(body)
    if isinstance(body, str):
        return len(body.encode("utf-8", "surrogatepass"))
    return -1


def malformation(message: DeliveredMessage) -> str | None:
    """Why ``message`` is not a dagwright task message Celery can safely read (None: it
    is one). Checked cheapest first; the body is parsed last, and only if small."""
    headers = message.headers
    if not isinstance(headers, dict):
        return "its headers are not a map: not a Celery protocol 2 message"
    task = headers.get("task")
    if not isinstance(task, str) or task not in TASK_ARGUMENTS:
        return "it names no dagwright task: not a dagwright message"
    return header_fault(headers) or body_fault(message, TASK_ARGUMENTS[task], task)


def header_fault(headers: dict[str, Any]) -> str | None:
    if not isinstance(headers.get("id"), str):
        return "it has no task id"
    if headers.get("compression"):
        return "its body is compressed: dagwright sends none, so it is not inflated"
    if not valid_time_limits(headers.get("timelimit")):
        return "its time limits are not [soft, hard] numbers"
    return None


def valid_time_limits(limits: object) -> bool:
    if limits is None:
        return True
    return (
        isinstance(limits, list | tuple)
        and len(limits) == 2
        and all(
            limit is None or is_json_type(limit, int) or isinstance(limit, float)
            for limit in limits
        )
    )


def body_fault(message: DeliveredMessage, expected: TaskArguments, task: str) -> str | None:
    if message.content_type != JSON_CONTENT_TYPE or message.content_encoding != "utf-8":
        return "its content type is not application/json in utf-8: only JSON is accepted"
    size = body_size(message.body)
    if not 0 <= size <= MAX_BODY_BYTES:
        return f"its body is not text of at most {MAX_BODY_BYTES} bytes"
    parts = protocol_2_parts(parsed_json(message.body))
    if parts is None:
        return "its body is not Celery protocol 2 ([args, kwargs, embed]) in JSON"
    args, kwargs, embed = parts
    if any(embed.get(key) for key in EMBED_KEYS) or embed.keys() - EMBED_KEYS:
        return "it carries callbacks or a workflow, which dagwright never sends"
    if not expected.fit(args, kwargs):
        return f"its arguments do not fit {expected.describe(task)}"
    return None


def parsed_json(body: object) -> object:
    """The decoded body, or None if it is not JSON (including nesting too deep to parse)."""
    try:
        return json.loads(body)  # type: ignore[arg-type]
    except (TypeError, ValueError, RecursionError):
        return None


def protocol_2_parts(
    body: object,
) -> tuple[list[Any], dict[str, Any], dict[str, Any]] | None:
    """``[args, kwargs, embed]`` by name, or None if the body is not that shape."""
    if not isinstance(body, list) or len(body) != 3:
        return None
    args, kwargs, embed = body
    if isinstance(args, list) and isinstance(kwargs, dict) and isinstance(embed, dict):
        return args, kwargs, embed
    return None

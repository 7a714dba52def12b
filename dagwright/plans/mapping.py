"""Dynamic fan-out (``Node.map``): the children a mapped node spawns and the output it joins.

A mapped node runs in two steps, both on a worker of its type and neither taking a
concurrency slot: when it is first claimed, its ``map.over`` dependency's output gives
the list (``items_of``), and one child per item is added to the run (``children_of``,
added by ``spawn.lua``, atomically); when every child has ended, the node is queued again
and its output is the children's outputs in the items' order (``joined_output``).

A child is the mapped node's spec under the id ``<id>[<index>]`` (brackets: no plan's id
can take them), with ``map.index`` and ``map.item`` set and no ``run_if``; ``{{ item }}``,
``{{ item.<key> }}`` and ``{{ index }}`` in its ``params`` are the item's values, by the
rules of ``{{ inputs… }}`` (``input_templates``): a string that is the reference alone
becomes the value with its JSON type, one inside text is written as text. Only ``params``:
an item is an upstream's output (perhaps a model's words), so it is data, never an
instruction; an agent child sees it as the ``over`` node's output (``child_inputs``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from dagwright.errors import PermanentError
from dagwright.models import DEFAULT_RUN_IF, MapOver, Node
from dagwright.plans.input_templates import template_texts
from dagwright.shown_ids import shown_id

NAME = r"[A-Za-z0-9_-]+"
ITEM_REFERENCE = re.compile(r"\{\{\s*(item(?:\." + NAME + r")*|index)\s*\}\}")
LOOKS_LIKE_ITEM = re.compile(r"\{\{\s{0,20}(?:item|index)\b[^}]{0,200}\}\}")


def child_id(node_id: str, index: int) -> str:
    """The id of the child of mapped node ``node_id`` for item ``index``."""
    return f"{node_id}[{index}]"


CHILD_ID = re.compile(r"^(?P<parent>[a-z0-9_-]{1,64})\[(?P<index>\d{1,9})\]$")


def parent_of(node_id: str) -> tuple[str, int] | None:
    """(mapped node, index) if ``node_id`` is a map's child, else None."""
    found = CHILD_ID.match(node_id)
    return (found["parent"], int(found["index"])) if found else None


def item_problems(node: Node) -> list[str]:
    """Plan problems of ``node``'s item templates and ``map`` (the bound is the validator's)."""
    where = f"node {shown_id(node.id)!r}"
    if node.map is None:
        if _mentions_item(node):
            return [f"{where} uses {{{{ item }}}} or {{{{ index }}}} but has no map: add one"]
        return []
    problems = []
    if node.map.over not in node.depends_on:
        problems.append(
            f"{where} maps over {shown_id(node.map.over)!r}, which is not in its "
            "depends_on: add it there"
        )
    if node.map.index is not None or node.map.item is not None:
        problems.append(f"{where}: map.index and map.item are set by dagwright; remove them")
    for text in (node.instruction or "", node.code or ""):
        if LOOKS_LIKE_ITEM.search(text):
            problems.append(
                f"{where}: {{{{ item }}}} goes in params only (an item is data); an agent "
                f"sees its item as the output of {node.map.over!r}"
            )
    return problems


def _mentions_item(node: Node) -> bool:
    texts = [node.code or "", *(text for _, text in template_texts(node))]
    return any(LOOKS_LIKE_ITEM.search(text) for text in texts)


def uses_item(node: Node) -> bool:
    """Whether ``node``'s params take values from its item (known only per child)."""
    return any(
        LOOKS_LIKE_ITEM.search(text) for where, text in template_texts(node) if where == "params"
    )


def bound_of(spec: MapOver, cap: int) -> int:
    """How many items ``spec`` maps at most, under the settings' cap."""
    return cap if spec.max_items is None else min(spec.max_items, cap)


def items_of(node: Node, inputs: dict[str, Any], cap: int) -> list[Any]:
    """The list ``node`` maps over, from its claimed inputs (PermanentError, naming what
    is wrong, if there is no list or it is over the bound without ``truncate``)."""
    spec = _map_of(node)
    value = _over_output(node, spec, inputs)
    for key in (spec.path or "").split(".") if spec.path else ():
        if not isinstance(value, dict) or key not in value:
            raise PermanentError(
                f"map of {node.id!r}: the output of {spec.over!r} has no {spec.path!r} "
                f"(no key {key!r} at that level)"
            )
        value = value[key]
    if not isinstance(value, list):
        raise PermanentError(
            f"map of {node.id!r}: {spec.over!r}{'.' + spec.path if spec.path else ''} "
            f"is a {type(value).__name__}, not a list"
        )
    bound = bound_of(spec, cap)
    if len(value) > bound and not spec.truncate:
        raise PermanentError(
            f"map of {node.id!r}: {len(value)} items, over its bound of {bound} "
            "(map.max_items, capped by DAGWRIGHT_MAP_MAX_ITEMS); set map.truncate: true "
            "to map the first ones only"
        )
    return value[:bound]


def _map_of(node: Node) -> MapOver:
    if node.map is None:
        raise ValueError(f"node {node.id!r} has no map")
    return node.map


def _over_output(node: Node, spec: MapOver, inputs: dict[str, Any]) -> Any:
    """The ``over`` node's output; a handler's input is an outcome envelope."""
    value = inputs.get(spec.over)
    if node.run_if == DEFAULT_RUN_IF:
        return value
    if not isinstance(value, dict) or value.get("status") != "succeeded":
        state = value.get("status") if isinstance(value, dict) else "missing"
        raise PermanentError(f"map of {node.id!r}: {spec.over!r} is {state}: no list to map over")
    return value.get("output")


def children_of(node: Node, items: list[Any]) -> list[tuple[str, str]]:
    """(id, spec JSON) of each child of mapped ``node``, one per item, in order; each read
    back as its claim will (PermanentError naming the item that makes no valid node: one
    nested too deep for params, say), so that no child is spawned that cannot run."""
    spec = _map_of(node)
    children = []
    for index, item in enumerate(items):
        child = node.model_copy(
            update={
                "id": child_id(node.id, index),
                "run_if": DEFAULT_RUN_IF,
                "map": spec.model_copy(update={"index": index, "item": item}),
                "params": _filled(node.params, item, index),
            }
        )
        encoded = child.model_dump_json(exclude_defaults=True)
        try:
            Node.model_validate_json(encoded)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            raise PermanentError(
                f"map of {node.id!r}: item {index} makes no valid node: {problem}"
            ) from None
        children.append((child.id, encoded))
    return children


def _filled(value: Any, item: Any, index: int) -> Any:
    if isinstance(value, str):
        whole = ITEM_REFERENCE.fullmatch(value.strip())
        if whole is not None:
            return _lookup(whole.group(1), item, index)
        return ITEM_REFERENCE.sub(lambda found: _text(found.group(1), item, index), value)
    if isinstance(value, dict):
        return {key: _filled(inner, item, index) for key, inner in value.items()}
    if isinstance(value, list):
        return [_filled(inner, item, index) for inner in value]
    return value


def _text(reference: str, item: Any, index: int) -> str:
    value = _lookup(reference, item, index)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _lookup(reference: str, item: Any, index: int) -> Any:
    """``index``, ``item`` or a key path inside it (None where the item lacks the key)."""
    if reference == "index":
        return index
    value = item
    for key in reference.split(".")[1:]:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def child_inputs(node: Node, inputs: dict[str, Any]) -> dict[str, Any]:
    """A child's inputs: its item as the ``over`` node's output (a child does not depend
    on ``over`` in the run's columns: its claim carries no copy of the whole list)."""
    spec = _map_of(node)
    return {**inputs, spec.over: spec.item}


def is_join(node: Node, inputs: dict[str, Any]) -> bool:
    """Whether a mapped node's claim is its join (its dependencies are its children)."""
    return child_id(node.id, 0) in inputs


def joined_output(node: Node, inputs: dict[str, Any]) -> list[Any]:
    """The children's outputs (or, for a node with a ``run_if`` rule, their outcome
    envelopes) in the items' order."""
    return [inputs[child_id(node.id, index)] for index in range(len(inputs))]

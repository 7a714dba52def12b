"""How deep and how big a JSON-like value is, measured without expanding it.

A plan's params arrive as Python values: parsed from a file, or built by a caller. Shared
references (a list put in two places, as a YAML alias or a Python variable makes) are
written out in full when the plan is serialized into Redis: a few hundred bytes of
aliases can stand for gigabytes. So the size is computed over the object graph, each
distinct container measured once and its size reused wherever it appears: linear in
the objects that exist, exact in the bytes their JSON would take. The walk is iterative,
so no depth of nesting reaches Python's recursion limit.

Non-finite floats (``inf``, ``nan``, what ``1e999`` parses to) are refused here: JSON
has no such numbers, and pydantic would store them as ``null``. So are bytes and text
with lone surrogates, which no JSON encoder writes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dagwright.shown_ids import shown_id

# str() refuses ints of over 4300 digits (CVE-2020-10735): longer ones are estimated
_DIGITS_PER_BIT = math.log10(2)
_MAX_STR_INT_BITS = 14_000


@dataclass(frozen=True)
class JsonShape:
    """A value's nesting depth (0 for a scalar, 1 for a flat list) and JSON size."""

    depth: int
    size_bytes: int


def json_shape(value: Any) -> JsonShape:
    """Measure ``value`` as JSON; ValueError for a non-finite number, a key that is not a
    string, or a container that contains itself."""
    if not _is_container(value):
        return JsonShape(0, scalar_bytes(value))
    shapes: dict[int, JsonShape] = {}
    entered: set[int] = set()
    stack = [value]
    while stack:
        item = stack[-1]
        if id(item) in shapes:
            stack.pop()
        elif id(item) in entered:
            stack.pop()
            shapes[id(item)] = _combine(item, shapes)
        else:
            entered.add(id(item))
            stack.extend(_unmeasured_children(item, shapes, entered))
    return shapes[id(value)]


def _unmeasured_children(item: Any, shapes: dict[int, JsonShape], entered: set[int]) -> list[Any]:
    children = [child for child in _children(item) if _is_container(child)]
    # A child entered but not measured is still open: one of this item's ancestors.
    if any(id(child) in entered and id(child) not in shapes for child in children):
        raise ValueError("contains itself (a reference cycle)")
    return [child for child in children if id(child) not in shapes]


def _combine(item: Any, shapes: dict[int, JsonShape]) -> JsonShape:
    depth, size = 0, 2 + max(len(item) - 1, 0)  # brackets and commas
    if isinstance(item, dict):
        size += sum(_key_bytes(key) + 1 for key in item)  # each key and its colon
    for child in _children(item):
        shape = shapes[id(child)] if _is_container(child) else JsonShape(0, scalar_bytes(child))
        depth, size = max(depth, shape.depth), size + shape.size_bytes
    return JsonShape(depth + 1, size)


def _children(item: Any) -> Iterable[Any]:
    return item.values() if isinstance(item, dict) else item


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple | set | frozenset)


def _key_bytes(key: Any) -> int:
    if not isinstance(key, str):
        raise ValueError(f"has a key that is not a string: {shown_id(repr(key))}")
    return scalar_bytes(key)


def scalar_bytes(value: Any) -> int:
    """Bytes of a scalar's JSON (a string's escapes aside)."""
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, str):
        return 2 + (len(value) if value.isascii() else _utf8_bytes(value))
    if isinstance(value, int):
        if value.bit_length() <= _MAX_STR_INT_BITS:
            return len(str(value))
        return 1 + int(value.bit_length() * _DIGITS_PER_BIT) + (value < 0)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"holds {value}: only finite numbers are allowed")
        return len(repr(value))
    if isinstance(value, bytes | bytearray):
        raise ValueError("holds bytes: only JSON values (text, numbers, lists, mappings)")
    return 2 + len(str(value))  # a date or the like, written as a string


def _utf8_bytes(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:  # "\ud800" in JSON, or a caller's str: no encoder takes it
        raise ValueError("holds text that is not valid Unicode (a lone surrogate)") from None

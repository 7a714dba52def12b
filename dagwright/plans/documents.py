"""Plan files into plain data (dicts, lists, strings, finite numbers), in bounded memory.

A plan file may be hostile, or written by a model: nothing in it may cost more memory
or time than its size allows, and every problem is a PlanError saying what to fix.

- The file is read at most ``max_bytes`` (+1, to tell that it is bigger): its size is
  checked before anything is parsed, and a FIFO or a growing file cannot get past it.
- ``.json`` files are read by the ``json`` module: YAML is a superset of JSON, but its
  pure-Python parser took 7.7 GB for a 78 MB JSON plan.
- Duplicate keys are refused (both parsers keep the last one silently).
- Non-finite numbers are refused: ``.inf``/``.nan`` in YAML, ``Infinity``/``NaN`` and
  numbers too large for a float (``1e999``) in JSON.
- Nesting deeper than MAX_DOCUMENT_DEPTH is refused, before YAML's recursive composer
  sees it (JSON's parser stops at the recursion limit; that is caught).
- YAML aliases (``*name``, merge keys ``<<: *name``) are refused. Rejected: counting
  the nodes an alias expands to. A plan is written out in full when stored, so the
  expanded size must be bounded anyway (``max_plan_bytes`` does that, for any source),
  and aliases buy a plan file little; refusing them keeps an alias bomb from reaching
  pydantic or the JSON encoder, and says so on the line where it starts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import yaml

from dagwright.errors import PlanError
from dagwright.json_shapes import json_shape
from dagwright.shown_ids import shown_id

MAX_DOCUMENT_DEPTH = 40
"""Levels of nesting of a plan file: the plan, its nodes and their params
(``models.MAX_PARAMS_DEPTH``) fit well inside."""

try:  # libyaml's parser: faster, and far less memory, than the pure-Python one
    from yaml import CSafeLoader as BaseSafeLoader
except ImportError:  # a PyYAML built without libyaml
    from yaml import SafeLoader as BaseSafeLoader  # type: ignore[assignment]


def read_plan_text(path: Path, max_bytes: int, setting: str) -> str:
    """The text of a plan file of at most ``max_bytes`` bytes (FileNotFoundError if there
    is none: the caller words it, with the path as given)."""
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise PlanError([f"cannot read the plan file: {exc.strerror or exc}"]) from None
    if len(data) > max_bytes:
        raise PlanError([f"the plan file is over {max_bytes} bytes, the limit ({setting})"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError([f"the plan file is not UTF-8 text (byte {exc.start})"]) from None


def parse_plan_text(text: str, *, json_file: bool) -> Any:
    """A plan file's data: JSON if it is a ``.json`` file, else YAML."""
    return parse_json(text) if json_file else parse_yaml(text)


def parse_json(text: str) -> Any:
    try:
        data = json.loads(
            text,
            object_pairs_hook=_mapping_without_duplicates,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
        )
    except RecursionError:
        _refuse_depth()
    except ValueError as exc:  # JSONDecodeError, and the hooks' refusals
        raise PlanError([f"not valid JSON: {exc}"]) from None
    return _checked_shape(data)


def _checked_shape(data: Any) -> Any:
    """``data``, once it is known to nest no deeper than the limit and to hold JSON values
    only (no lone surrogates from ``\\ud800``, no YAML ``!!binary``, no non-string keys)."""
    try:
        depth = json_shape(data).depth
    except ValueError as exc:
        raise PlanError([f"the plan {exc}"]) from None
    if depth > MAX_DOCUMENT_DEPTH:
        _refuse_depth()
    return data


def _mapping_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping = dict(pairs)
    if len(mapping) < len(pairs):
        duplicate = _first_duplicate(key for key, _ in pairs)
        raise ValueError(f"duplicate key {shown_id(repr(duplicate))}: give each key once")
    return mapping


def _first_duplicate(keys: Iterable[Any]) -> Any:
    seen: set[Any] = set()
    for key in keys:
        if key in seen:
            return key
        seen.add(key)
    return None


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number a plan may hold: only finite numbers")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{shown_id(repr(text))} is too large a number: only finite numbers")
    return number


# PyYAML's constructors fail with these, not a YAMLError, on some scalars: an int too long
# to convert, `!!bool maybe` (KeyError), `!!timestamp x` (AttributeError), `2001-02-30`.
_CONSTRUCTOR_FAILURES = (ValueError, LookupError, ArithmeticError, AttributeError, TypeError)


def parse_yaml(text: str) -> Any:
    try:
        _check_yaml_events(text)
        data = yaml.load(text, Loader=PlanYamlLoader)  # a safe loader: see PlanYamlLoader
    except yaml.YAMLError as exc:
        raise PlanError([f"not valid YAML: {_yaml_problem(exc)}"]) from None
    except _CONSTRUCTOR_FAILURES as exc:
        raise PlanError([f"not valid YAML: {' '.join(str(exc).split())}"]) from None
    return _checked_shape(data)


def _check_yaml_events(text: str) -> None:
    """Refuse aliases and deep nesting from the event stream, which costs no memory."""
    depth = 0
    for event in yaml.parse(text, Loader=BaseSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise PlanError(
                [
                    f"YAML aliases are not allowed in plan files (*{(event.anchor or '')[:30]} "
                    f"{_where(event.start_mark)}): write the value out"
                ]
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DOCUMENT_DEPTH:
                _refuse_depth()
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _refuse_depth() -> NoReturn:
    raise PlanError([f"the plan is nested more than {MAX_DOCUMENT_DEPTH} levels deep"])


class PlanYamlLoader(BaseSafeLoader):
    """A safe loader that refuses duplicate keys and non-finite numbers."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        if len(mapping) < len(node.value):
            self._refuse_duplicate_key(node)
        return mapping

    def _refuse_duplicate_key(self, node: yaml.MappingNode) -> NoReturn:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node)  # built already: this looks it up
            if key in seen:
                problem = f"duplicate key {shown_id(repr(key))}: give each key once"
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
            seen.add(key)
        raise AssertionError("a mapping shorter than its node has a duplicate key")

    def construct_finite_float(self, node: yaml.ScalarNode) -> float:
        number: float = self.construct_yaml_float(node)
        if not math.isfinite(number):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value} is not allowed: only finite numbers", node.start_mark
            )
        return number


PlanYamlLoader.add_constructor("tag:yaml.org,2002:float", PlanYamlLoader.construct_finite_float)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return " ".join(f"{problem} {_where(mark)}".split()) if mark else " ".join(problem.split())


def _where(mark: Any) -> str:
    return f"at line {mark.line + 1}, column {mark.column + 1}" if mark else ""

"""JSON Schemas that a submitter, a planner or a model wrote: checked before use, then
validated without fetching anything and in linear time. The one entry point for every
schema dagwright did not write itself: a plan's ``inputs:`` (submits, ``dagwright run``,
schedules, the API, a planner's plan), a node's ``output_schema``, and evals to come.

``schema_problems`` says what is wrong with a schema, one line each; ``schema_validator``
validates against a schema it accepted. What they add to plain ``jsonschema`` (Draft
2020-12):

- Nothing is fetched. A ``$ref`` (``$dynamicRef``) is a fragment of the same document
  (``#/$defs/x``, ``#anchor``) that resolves within it; any other (``http:``, ``file:``,
  ``urn:``, a relative file) is a problem of the schema, found when it is checked. The
  validator's registry is empty, so even a reference that slipped past would fail, not
  be fetched: jsonschema's default resolver opens any URL, with no timeout.
- ``pattern`` and ``patternProperties`` (and ``additionalProperties`` beside them) are
  matched by RE2, whose time is linear in the text: Python's backtracking ``re`` takes
  seconds on ``^(a+)+$`` against 30 characters, doubling with each one. A pattern RE2
  cannot compile (a backreference, a lookaround) is a problem of the schema.
  ``unevaluatedProperties`` beside ``patternProperties`` is refused: jsonschema would
  match the patterns with ``re`` there. ``format`` is an annotation, never checked.
- The schema is bounded before it is read: size (``MAX_SCHEMA_BYTES``) and nesting.
- A ``$ref`` that leads back to itself without going into the value (``{"$ref": "#"}``)
  is refused: it would recurse until Python's stack ran out.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import re2
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from dagwright.json_shapes import json_shape

if TYPE_CHECKING:
    from referencing._core import Resolver

MAX_SCHEMA_BYTES = 32 * 1024  # of one schema's JSON
MAX_SCHEMA_DEPTH = 32  # levels of nesting, as a node's params
# Mappings in one schema (its subschemas, mostly): jsonschema checks a schema against
# its metaschema at 1 to 3 ms a subschema (1400 tiny ones, 21 KiB, took 5 s).
MAX_SCHEMA_MAPPINGS = 256
MAX_PATTERN_CHARS = 1000
MAX_PATTERN_PROGRAM = 4000  # RE2 instructions: `[a-z]{1,1000}` is 2004, `.{0,1000}` 9000
RE2_MAX_MEM = 4 * 1024 * 1024  # bytes RE2 may use for one compiled pattern (program, DFA)
# RE2 matches in time linear in the text, times the program's size when its DFA gives
# up (13 to 60 ns a unit on a busy 2-core machine). So the work of one validation is
# bounded: characters matched times instructions, at most about half a second.
MAX_MATCH_WORK = 10_000_000
TOO_MUCH_MATCHING = (
    "it is too long to be matched against the schema's patterns (characters matched times "
    f"the patterns' sizes over {MAX_MATCH_WORK:,}): shorten the text or the patterns"
)
SHOWN_VALUE_CHARS = 120
MAX_SCHEMA_REFERENCES = 100  # each hop of a chain of them is a few frames of Python's stack
REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")
NO_FETCHING: Registry[Any] = Registry()  # resolves nothing outside a document

# Draft 2020-12's keywords whose value is a schema, a list of schemas, or a mapping of
# names to schemas: where a validator goes, and so where the checks look.
ONE_SCHEMA = (
    "additionalProperties", "contains", "contentSchema", "else", "if", "items", "not",
    "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties",
)  # fmt: skip
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SCHEMA_MAPPINGS = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties")
# Keywords that check the same value in place: a loop of these never ends.
IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message says why."""


class TooMuchMatchingError(Exception):
    """Matching would pass ``MAX_MATCH_WORK``: the validation stops."""


# The work of the validation under way (``schema_errors``): one counter each.
_match_work: ContextVar[list[int] | None] = ContextVar("json_schemas_match_work", default=None)


# -- checking a schema -------------------------------------------------------------


def schema_problems(schema: Any, name: str) -> list[str]:
    """Every reason ``schema`` cannot be used, one line each, located from ``name``
    (``inputs.properties.zip.pattern: …``). Empty: ``schema_validator`` takes it."""
    bound_problem = _bound_problem(schema, name)
    if bound_problem:
        return [bound_problem]
    try:
        Draft202012Validator.check_schema(schema, format_checker=_SCHEMA_FORMATS)
    except SchemaError as exc:
        return [f"{_located(name, exc.absolute_path)}: not a valid JSON Schema: {exc.message}"]
    if not isinstance(schema, dict):
        return []  # true or false: nothing inside
    parts = list(_parts(schema, name))
    problems = [problem for part in parts for problem in _part_problems(part)]
    problems += _mixing_problems(parts, name) + _reference_count_problems(parts, name)
    if problems:
        return problems
    try:
        return _loop_problems(parts)
    except RecursionError:  # a chain of references and in-place keywords that long
        return [f"{name}: the schema's references lead through too many steps in a row"]


def _bound_problem(schema: Any, name: str) -> str | None:
    try:
        shape = json_shape(schema)
    except ValueError as exc:
        return f"{name}: the schema {exc}"
    if shape.depth > MAX_SCHEMA_DEPTH:
        depth = shape.depth
        return f"{name}: the schema is nested {depth} levels deep; the limit is {MAX_SCHEMA_DEPTH}"
    if shape.size_bytes > MAX_SCHEMA_BYTES:
        return (
            f"{name}: the schema is {shape.size_bytes} bytes of JSON; the limit is "
            f"{MAX_SCHEMA_BYTES}"
        )
    mappings = _mapping_count(schema)
    if mappings > MAX_SCHEMA_MAPPINGS:
        return (
            f"{name}: the schema has {mappings} mappings (subschemas and the like); the "
            f"limit is {MAX_SCHEMA_MAPPINGS}"
        )
    return None


def _mapping_count(value: Any) -> int:
    """The mappings in a JSON value, each place it appears (its size is bounded, so
    shared ones cannot multiply past it)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            count += 1
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return count


def _located(name: str, path: Iterable[Any]) -> str:
    return ".".join([name, *(str(part)[:60] for part in path)])


@dataclass(frozen=True)
class _Part:
    """One subschema of a document: where it is, what it holds, how its references
    resolve (its base URI: an ``$id`` above it changes it)."""

    where: str
    contents: dict[str, Any]
    resolver: Resolver[Any]


def _parts(schema: dict[str, Any], name: str) -> Iterator[_Part]:
    """Every subschema of ``schema`` that is a mapping, the document's root first."""
    root = DRAFT202012.create_resource(schema)
    stack = [_Part(name, schema, NO_FETCHING.resolver_with_root(root))]
    while stack:
        part = stack.pop()
        yield part
        for where, child in reversed(list(_children(part.contents))):  # popped in order
            if isinstance(child, dict):
                resolver = part.resolver.in_subresource(DRAFT202012.create_resource(child))
                stack.append(_Part(f"{part.where}.{where}", child, resolver))


def _children(schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The subschemas right under ``schema``, each with its path from it."""
    for keyword in ONE_SCHEMA:
        if keyword in schema:
            yield keyword, schema[keyword]
    for keyword in SCHEMA_LISTS:
        for index, child in enumerate(schema.get(keyword, [])):
            yield f"{keyword}.{index}", child
    for keyword in SCHEMA_MAPPINGS:
        for key, child in schema.get(keyword, {}).items():
            yield f"{keyword}.{str(key)[:60]}", child


def _part_problems(part: _Part) -> list[str]:
    problems = [_reference_problem(part, keyword) for keyword in REFERENCE_KEYWORDS]
    patterns = [("pattern", part.contents.get("pattern"))] + [
        (f"patternProperties.{key[:60]}", key) for key in part.contents.get("patternProperties", {})
    ]
    problems += [_pattern_problem(f"{part.where}.{where}", text) for where, text in patterns]
    return [problem for problem in problems if problem]


def _reference_problem(part: _Part, keyword: str) -> str | None:
    reference = part.contents.get(keyword)
    if not isinstance(reference, str):
        return None
    where = f"{part.where}.{keyword}"
    if not reference.startswith("#"):
        return (
            f"{where}: {reference[:120]!r} points outside the schema; a reference may only "
            "name a part of the same schema (`#/$defs/...`), nothing is fetched"
        )
    try:
        part.resolver.lookup(reference)
    except Unresolvable:
        return f"{where}: {reference[:120]!r} names no part of the schema"
    return None


def _pattern_problem(where: str, pattern: Any) -> str | None:
    if not isinstance(pattern, str):
        return None
    try:
        compiled_pattern(pattern)
    except PatternError as exc:
        return (
            f"{where}: {pattern[:120]!r} is refused: {exc} (patterns are matched by RE2, in "
            "linear time: no backreferences, no lookarounds)"
        )
    return None


def _mixing_problems(parts: list[_Part], name: str) -> list[str]:
    keywords = {keyword for part in parts for keyword in part.contents}
    if {"unevaluatedProperties", "patternProperties"} <= keywords:
        return [
            f"{name}: `unevaluatedProperties` cannot be used with `patternProperties` in one "
            "schema; use `additionalProperties` beside the patterns"
        ]
    return []


def _reference_count_problems(parts: list[_Part], name: str) -> list[str]:
    count = sum(keyword in part.contents for part in parts for keyword in REFERENCE_KEYWORDS)
    if count <= MAX_SCHEMA_REFERENCES:
        return []
    return [f"{name}: the schema has {count} references; the limit is {MAX_SCHEMA_REFERENCES}"]


def _loop_problems(parts: list[_Part]) -> list[str]:
    """A reference that leads back to where it started, checking the same value in
    place all the way (through ``$ref``, ``allOf``, ``not``, ...): validating would
    never end. (Every reference resolves: checked before.)"""
    by_id = {id(part.contents): part for part in parts}
    done: set[int] = set()
    for start in parts:
        looping = _in_place_loop(start, by_id, done, set())
        if looping is not None:
            return [
                f"{looping}: the schema refers back to itself without going into the value "
                "(validating it would never end)"
            ]
    return []


def _in_place_loop(
    part: _Part, parts: dict[int, _Part], done: set[int], path: set[int]
) -> str | None:
    """Where a loop of in-place steps from ``part`` closes, if one does."""
    key = id(part.contents)
    if key in path:
        return part.where
    if key in done:
        return None
    path.add(key)
    for step in _in_place_steps(part, parts):
        looping = _in_place_loop(step, parts, done, path)
        if looping is not None:
            return looping
    path.discard(key)
    done.add(key)
    return None


def _in_place_steps(part: _Part, parts: dict[int, _Part]) -> Iterator[_Part]:
    for where, child in _children(part.contents):
        if where.split(".")[0] in IN_PLACE and id(child) in parts:
            yield parts[id(child)]
    for keyword in REFERENCE_KEYWORDS:
        reference = part.contents.get(keyword)
        if isinstance(reference, str) and reference.startswith("#"):
            target = part.resolver.lookup(reference).contents
            if id(target) in parts:
                yield parts[id(target)]


# -- patterns ----------------------------------------------------------------------


@functools.lru_cache(maxsize=64)  # each up to RE2_MAX_MEM
def compiled_pattern(pattern: str) -> re2._Regexp:
    """``pattern`` compiled by RE2 (matching takes time linear in the text); PatternError
    if RE2 cannot compile it (backreferences, lookarounds) or it is too big."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"it is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}")
    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern to stderr
    options.max_mem = RE2_MAX_MEM
    options.never_capture = True  # match or not: lets RE2 use its DFA (100x faster)
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "RE2 refuses it"
        raise PatternError(reason.decode() if isinstance(reason, bytes) else str(reason)) from None
    if compiled.programsize > MAX_PATTERN_PROGRAM:
        size = compiled.programsize
        raise PatternError(
            f"it compiles to {size} instructions; the limit is {MAX_PATTERN_PROGRAM}"
        )
    return compiled


def matches(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema's unanchored
    search), its work counted against ``MAX_MATCH_WORK``: TooMuchMatchingError past it."""
    compiled = compiled_pattern(pattern)
    _charge(len(text) * compiled.programsize)
    return compiled.search(text) is not None


def _charge(work: int) -> None:
    spent = _match_work.get()
    if spent is None:  # outside schema_errors: each match on its own
        spent = [0]
    spent[0] += work
    if spent[0] > MAX_MATCH_WORK:
        raise TooMuchMatchingError


# The metaschema's formats but ``regex`` (Python's ``re``): the patterns are RE2's, and
# checked as such by ``_pattern_problem``, with a clearer line.
_SCHEMA_FORMATS = FormatChecker([name for name in FormatChecker.checkers if name != "regex"])


# A keyword's function is given the validator class's instance: ``Validator``, the
# protocol, lacks the ``descend`` these use, hence ``Any``.


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not matches(pattern, instance):
        yield ValidationError(f"{_shown(instance)} does not match {pattern!r}")


def _shown(text: str) -> str:
    return repr(text if len(text) <= SHOWN_VALUE_CHARS else text[:SHOWN_VALUE_CHARS] + "…")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = sorted(_extras(instance, schema), key=str)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        verb = "was" if len(extras) == 1 else "were"
        listed = ", ".join(_shown(extra) for extra in extras)
        yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


def _extras(instance: dict[str, Any], schema: dict[str, Any]) -> Iterator[str]:
    """The keys neither ``properties`` nor a pattern of ``patternProperties`` name."""
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    for key in instance:
        if key not in properties and not any(matches(pattern, key) for pattern in patterns):
            yield key


SchemaValidator = extend(
    Draft202012Validator,
    validators={
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)
"""Draft 2020-12, patterns matched by RE2."""


# -- validating --------------------------------------------------------------------


def schema_validator(schema: dict[str, Any] | bool) -> Validator:
    """A validator of a schema ``schema_problems`` accepted: references resolve within
    the document only (never fetched), patterns run in linear time."""
    validator: Validator = SchemaValidator(schema, registry=NO_FETCHING)
    return validator


def schema_errors(validator: Validator, instance: Any) -> list[ValidationError]:
    """Every way ``instance`` fails the validator's schema. A value nested so deep that
    checking it would exhaust Python's stack fails with one error saying so; so does one
    whose matching would pass ``MAX_MATCH_WORK`` (its text times the patterns' sizes),
    and a schema ``schema_problems`` never saw (a reference outside it, a pattern RE2
    refuses): refused here too, never fetched nor run by ``re``."""
    work = _match_work.set([0])
    try:
        return list(validator.iter_errors(instance))
    except TooMuchMatchingError:
        return [ValidationError(TOO_MUCH_MATCHING)]
    except RecursionError:
        return [ValidationError("it is nested too deep for its schema to be checked")]
    except (Unresolvable, PatternError) as exc:
        return [ValidationError(f"its schema cannot be used: {str(exc)[:200]}")]
    finally:
        _match_work.reset(work)

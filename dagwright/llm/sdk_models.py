"""The model ids the installed ``anthropic`` SDK knows, read from its ``Model`` type.

Kept out of :mod:`dagwright.llm.anthropic` because the fake API needs the list without an
API client, and apart from :mod:`dagwright.llm.messages_api_rules` so that the rules stay
plain data. The SDK is imported inside the function: importing this module costs nothing.
"""

from __future__ import annotations

import functools
import typing


@functools.cache
def sdk_model_ids() -> frozenset[str]:
    """Every literal model id of ``anthropic.types.Model`` (a ``Literal[...] | str``)."""
    from anthropic.types import Model  # the SDK's own list, updated with each release

    return frozenset(_literals(Model))


def _literals(annotation: object) -> set[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return {value for value in typing.get_args(annotation) if isinstance(value, str)}
    found: set[str] = set()
    for argument in typing.get_args(annotation):
        found |= _literals(argument)
    return found


@functools.cache
def sdk_end_of_life() -> dict[str, str]:
    """The end-of-life date (as the SDK words it: "November 30th, 2026") of each model the
    installed SDK marks deprecated; empty if this SDK carries no such list."""
    try:  # a private module of the SDK: its warning on each call reads it too
        from anthropic._data import DEPRECATED_MODELS
    except ImportError:
        return {}
    return dict(DEPRECATED_MODELS)

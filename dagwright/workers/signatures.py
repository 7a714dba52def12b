"""Python signatures as pydantic models: how functions and tools get typed arguments.

A registered function's params and a tool's arguments are both checked against the
callable's signature (and, for tools, shown to the model as its JSON schema).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo


def params_model(
    func: Callable[..., Any],
    model_name: str,
    *,
    reserved: Collection[str],
    descriptions: Mapping[str, str] | None = None,
) -> type[BaseModel]:
    """A model of ``func``'s keyword parameters, leaving out ``reserved`` names (which
    dagwright passes itself) and ``*args``; ``**kwargs`` lets extra fields in. A
    parameter's entry in ``descriptions`` becomes its field's description (its JSON
    schema's), unless its annotation carries one already (``Annotated[str, Field(...)]``)."""
    fields: dict[str, Any] = {}
    accepts_extra = False
    for param in _signature(func).parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_extra = True
        elif param.kind is not inspect.Parameter.VAR_POSITIONAL and param.name not in reserved:
            fields[param.name] = _field(param, (descriptions or {}).get(param.name))
    config = ConfigDict(extra="allow" if accepts_extra else "forbid", arbitrary_types_allowed=True)
    model: type[BaseModel] = create_model(model_name, __config__=config, **fields)
    return model


def _signature(func: Callable[..., Any]) -> inspect.Signature:
    """The signature with its annotations evaluated (a module with ``from __future__
    import annotations`` holds them as strings, which pydantic cannot resolve outside
    that module), else as written (an annotation imported only for type checkers)."""
    try:
        return inspect.signature(func, eval_str=True)
    except (NameError, TypeError, SyntaxError):
        return inspect.signature(func)


def _field(param: inspect.Parameter, description: str | None) -> tuple[Any, Any]:
    annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
    default = ... if param.default is inspect.Parameter.empty else param.default
    if description is None or _described(annotation):
        return annotation, default
    return annotation, Field(default, description=description)


def _described(annotation: Any) -> bool:
    """Whether an ``Annotated`` annotation holds a pydantic Field with a description."""
    return any(
        isinstance(extra, FieldInfo) and extra.description
        for extra in getattr(annotation, "__metadata__", ())
    )


def accepts(func: Callable[..., Any], name: str) -> bool:
    return name in inspect.signature(func).parameters


def validated_kwargs(model: type[BaseModel], raw: dict[str, Any]) -> dict[str, Any]:
    """Validate ``raw`` with ``model``; the values as keyword arguments (extras included)."""
    validated = model.model_validate(raw)
    kwargs = {name: getattr(validated, name) for name in type(validated).model_fields}
    kwargs.update(validated.model_extra or {})
    return kwargs


def first_doc_line(func: Callable[..., Any]) -> str:
    doc = inspect.getdoc(func) or ""
    return doc.splitlines()[0] if doc else ""


def run_to_completion(result: Any) -> Any:
    """The value of a call, awaiting it if the callable was ``async``."""
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


async def _await(awaitable: Any) -> Any:
    return await awaitable


def describe_validation_error(exc: ValidationError, root: str) -> str:
    """pydantic's errors as one line: ``params.sep: Input should be a valid string``."""
    parts = []
    for error in exc.errors():
        location = ".".join(str(part) for part in (root, *error["loc"]))
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)


def qualified_name(func: Callable[..., Any]) -> str:
    """``module:name`` of a function, to say which of two is which."""
    return f"{getattr(func, '__module__', '?')}:{getattr(func, '__qualname__', repr(func))}"

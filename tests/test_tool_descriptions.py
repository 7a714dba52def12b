"""What the model reads of a tool: its whole docstring, and a description per argument."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from dagwright.workers import builtin_registry
from dagwright.workers.docstrings import argument_descriptions, tool_description
from dagwright.workers.tools.base import ToolRegistry


def search(query: str, limit: int = 5, **filters: Any) -> str:
    """Search the catalogue for products, best match first. The query is matched
    against names and descriptions.

    Use it before recommending anything.

    Args:
        query: Words to look for; several words
            must all match.
        limit (int): How many results at most.
        **filters: Exact values of other fields.

    Returns:
        One line per product.
    """
    return query


def tagged(ctx: Any, tag: Annotated[str, Field(description="From the annotation.")]) -> str:
    """Tag something.

    Args:
        tag: From the docstring.
    """
    return tag


def test_the_whole_docstring_is_the_description_without_its_args_section() -> None:
    assert tool_description(search) == (
        "Search the catalogue for products, best match first. The query is matched against "
        "names and descriptions.\n\nUse it before recommending anything.\n\n"
        "Returns:\n    One line per product."
    )


def test_each_argument_gets_its_docstring_entry() -> None:
    assert argument_descriptions(search) == {
        "query": "Words to look for; several words must all match.",
        "limit": "How many results at most.",
        "filters": "Exact values of other fields.",
    }


def test_the_schema_carries_the_descriptions_and_an_annotation_wins() -> None:
    tools = ToolRegistry()
    schema = tools.register(search).schema()
    properties = schema["input_schema"]["properties"]
    assert properties["query"]["description"].startswith("Words to look for")
    assert properties["limit"] == {
        "default": 5,
        "description": "How many results at most.",
        "title": "Limit",
        "type": "integer",
    }
    tagged_schema = tools.register(tagged).schema()["input_schema"]
    assert tagged_schema["properties"]["tag"]["description"] == "From the annotation."


def test_every_builtin_tool_describes_itself_and_each_argument_fully() -> None:
    registry = builtin_registry().tools
    for name in registry.names():
        schema = registry.get(name).schema()  # type: ignore[union-attr]
        if registry.get(name).api_definition is not None:  # type: ignore[union-attr]
            assert "description" not in schema  # the API describes its own tools
            continue
        assert schema["description"].rstrip().endswith((".", ")")), schema["description"]
        for argument, field in schema["input_schema"].get("properties", {}).items():
            assert field.get("description"), f"{name}.{argument} has no description"
    run_python = registry.get("run_python").schema()  # type: ignore[union-attr]
    assert "returns its exit status, stdout and stderr" in run_python["description"]

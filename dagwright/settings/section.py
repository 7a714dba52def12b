"""The base of every settings section, and what sections share.

A section is a frozen model of related settings, named without their common prefix
(``SandboxSettings.memory_mb``). Each field keeps its flat name, which is the setting's
name everywhere a user writes it: ``DAGWRIGHT_SANDBOX_MEMORY_MB``, ``sandbox_memory_mb``
in dagwright.toml, ``Settings(sandbox_memory_mb=...)``. The flat name is the section's
``prefix`` and the field's name, unless the field is listed in ``flat_names``.
"""

from __future__ import annotations

import json
from typing import Annotated, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic_settings import NoDecode


def split_list(value: object) -> object:
    """A list from the environment: ``"a.b,c.d"``, or a JSON list."""
    if not isinstance(value, str):
        return value
    if value.lstrip().startswith("["):
        return json.loads(value)
    return [part.strip() for part in value.split(",") if part.strip()]


CommaList = Annotated[list[str], NoDecode, BeforeValidator(split_list)]
"""A list of strings, comma-separated (or JSON) in the environment."""


class Section(BaseModel):
    """Settings read together by the code that uses them."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    prefix: ClassVar[str] = ""
    """What the flat names of the section's fields start with (``sandbox_``)."""
    flat_names: ClassVar[dict[str, str]] = {}
    """Field -> flat name, for the fields whose flat name is not ``prefix`` + field."""
    also_env: ClassVar[dict[str, str]] = {}
    """Field -> another environment variable it is read from (``ANTHROPIC_API_KEY``)."""

    def __hash__(self) -> int:
        # Sections key caches (the sandbox a host was probed with); their lists are not
        # hashable, their JSON is (secrets masked: equality still tells them apart).
        return hash(self.model_dump_json())

    @classmethod
    def flat_name(cls, field: str) -> str:
        """The setting's name as users write it (``sandbox_memory_mb``)."""
        return cls.flat_names.get(field, cls.prefix + field)

"""Where settings come from, and how flat names find their section.

Users write flat names (``DAGWRIGHT_SANDBOX_MEMORY_MB``, ``sandbox_memory_mb = 128`` in
dagwright.toml, ``Settings(sandbox_memory_mb=128)``); code reads sections
(``settings.sandbox.memory_mb``). Each source's values are nested into sections before
pydantic-settings merges the sources, so precedence holds field by field: a flag beats
the environment, which beats the file, whichever spelling each used. A TOML table named
for a section (``[sandbox]`` ``memory_mb = 128``) is read as well.

Rejected: ``env_nested_delimiter`` (it renames every variable, ``DAGWRIGHT_SANDBOX__MEMORY_MB``)
and one alias per field (125 hand-written aliases, and error locations with both names).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AliasChoices, BaseModel, Field, create_model
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from dagwright.errors import ConfigurationError
from dagwright.settings.section import Section

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


class FlatNames:
    """The map between flat setting names and (section, field), built from the sections."""

    def __init__(self, sections: Mapping[str, type[Section]]) -> None:
        self.sections = dict(sections)
        self.place: dict[str, tuple[str, str]] = {}
        for section, cls in self.sections.items():
            for field in cls.model_fields:
                flat = cls.flat_name(field)
                if flat in self.place or flat in self.sections:
                    raise TypeError(f"setting {flat} is declared twice")
                self.place[flat] = (section, field)
        self.flat = {place: flat for flat, place in self.place.items()}
        self._flat_model: type[BaseSettings] | None = None

    def flat_model(self) -> type[BaseSettings]:
        """The flat model the environment is read through, built once."""
        if self._flat_model is None:
            self._flat_model = flat_model(self)
        return self._flat_model

    def nest(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Flat keys moved into their sections' dicts; a flat key beats the same field in
        a section table of the same source. Unknown keys stay (and are ignored)."""
        nested: dict[str, Any] = {}
        for key, value in data.items():
            if key in self.sections:
                nested[key] = {**nested.get(key, {}), **section_values(value)}
            elif key not in self.place:
                nested[key] = value
        for key, value in data.items():
            if key in self.place:
                section, field = self.place[key]
                nested.setdefault(section, {})[field] = value
        return nested

    def located(self, exc: ValidationError) -> ValidationError:
        """The same errors, each located by the flat name the user wrote (``lease_s``), so
        messages name the setting and its ``DAGWRIGHT_`` variable as they always have."""
        details: list[InitErrorDetails] = []
        for error in exc.errors():
            loc = error["loc"]
            if len(loc) >= 2 and (str(loc[0]), str(loc[1])) in self.flat:
                loc = (self.flat[(str(loc[0]), str(loc[1]))], *loc[2:])
            elif len(loc) == 1 and loc[0] in self.sections:
                loc = ()  # a check across fields of one section, as before
            details.append(
                {
                    "type": PydanticCustomError(error["type"], error["msg"]),
                    "loc": loc,
                    "input": error["input"],
                }
            )
        return ValidationError.from_exception_data(exc.title, details)


def section_values(value: object) -> dict[str, Any]:
    """A section given as a dict or as a section object, as a dict of its fields."""
    if isinstance(value, BaseModel):
        return {name: getattr(value, name) for name in value.model_fields_set}
    if isinstance(value, Mapping):
        return dict(value)
    raise ValueError(f"a section of settings is a table, not {type(value).__name__}")


class Nested(PydanticBaseSettingsSource):
    """Another source's values, nested into sections."""

    def __init__(
        self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource, names: FlatNames
    ) -> None:
        super().__init__(settings_cls)
        self.inner = inner
        self.names = names

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the inner source whole

    def __call__(self) -> dict[str, Any]:
        return self.names.nest(self.inner())


def flat_env_source(settings_cls: type[BaseSettings], names: FlatNames) -> EnvSettingsSource:
    """pydantic-settings' own environment source, over a flat model of every setting: it
    reads ``DAGWRIGHT_<FLAT_NAME>`` (and the ``also_env`` names), decodes JSON where the
    field wants it, and leaves comma lists (``NoDecode``) to the fields' validators."""
    return _FlatEnvSource(names.flat_model(), names)


def flat_model(names: FlatNames) -> type[BaseSettings]:
    """A settings class with every setting as a flat, optional field (read, not validated)."""
    fields: dict[str, Any] = {}
    for flat, (section, field) in names.place.items():
        cls = names.sections[section]
        info = cls.model_fields[field]
        annotation = (
            Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        )
        also = cls.also_env.get(field)
        alias = AliasChoices(f"DAGWRIGHT_{flat.upper()}", also) if also else None
        fields[flat] = (annotation, Field(None, validation_alias=alias))
    return create_model("FlatSettings", __base__=_FlatBase, **fields)


class _FlatBase(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DAGWRIGHT_", extra="ignore")


class _FlatEnvSource(EnvSettingsSource):
    def __init__(self, flat_model: type[BaseSettings], names: FlatNames) -> None:
        super().__init__(flat_model)
        self.names = names
        self.alias_of = {
            choice: flat
            for flat, info in flat_model.model_fields.items()
            if isinstance(info.validation_alias, AliasChoices)
            for choice in info.validation_alias.choices
            if isinstance(choice, str)
        }

    def __call__(self) -> dict[str, Any]:
        values = {self.alias_of.get(key, key): value for key, value in super().__call__().items()}
        return self.names.nest(values)


class CheckedTomlSource(TomlConfigSettingsSource):
    """The TOML source, with a file that does not parse refused in one line that names it
    (pydantic-settings lets tomllib's error through, which reads as a crash)."""

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            return super()._read_file(file_path)
        except ValueError as exc:  # tomllib.TOMLDecodeError
            raise ConfigurationError(
                f"{file_path} is not valid TOML ({exc}): fix it, or point "
                "DAGWRIGHT_CONFIG_FILE at another file"
            ) from exc
        except OSError as exc:
            raise ConfigurationError(f"cannot read {file_path}: {exc}") from exc


def config_file_source(settings_cls: type[BaseSettings]) -> CheckedTomlSource:
    """``DAGWRIGHT_CONFIG_FILE``, which must exist when it is set (``/dev/null`` for no
    file); else ``./dagwright.toml`` if there is one. A file named on purpose and missing
    is a typo, not "no settings"."""
    named = os.environ.get("DAGWRIGHT_CONFIG_FILE")
    if named and (not Path(named).exists() or Path(named).is_dir()):  # /dev/null: none
        raise ConfigurationError(
            f"DAGWRIGHT_CONFIG_FILE names {named}, which is not a file: fix the path, or "
            "unset it to read ./dagwright.toml"
        )
    return CheckedTomlSource(settings_cls, named or "dagwright.toml")

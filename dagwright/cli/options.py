"""Options shared by several commands, and Settings built from flags (flag > env > file)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError

from dagwright.errors import ConfigurationError
from dagwright.models import Budget
from dagwright.settings import Settings

if TYPE_CHECKING:
    from dagwright.client import Client

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of text.")]
WideOption = Annotated[
    bool,
    typer.Option(
        "--wide", "-w", help="Every column, whole, however wide (the terminal wraps lines)."
    ),
]
ImportOption = Annotated[
    list[str] | None,
    typer.Option(
        "--import",
        "-I",
        help="Module registering your functions or worker types "
        "(repeatable; adds to DAGWRIGHT_IMPORTS).",
    ),
]


def settings_from(imports: list[str] | None, **flags: Any) -> Settings:
    """Settings from the environment and config file, overridden by the flags given."""
    try:
        base = Settings()
        overrides = {name: value for name, value in flags.items() if value is not None}
        if imports:
            overrides["imports"] = [*base.process.imports, *imports]
        return (
            Settings(**{**base.model_dump(exclude_unset=True), **overrides}) if overrides else base
        )
    except SettingsError as exc:
        raise ConfigurationError(f"invalid settings: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"DAGWRIGHT_{'_'.join(str(p) for p in e['loc']).upper() or 'SETTINGS'}: {e['msg']}"
            for e in exc.errors()
        )
        raise ConfigurationError(f"invalid settings: {problems}") from exc


def client_from(imports: list[str] | None) -> Client:
    """A client with the settings of the environment, the config file and ``--import``."""
    from dagwright.client import Client  # the commands that need no client start faster

    return Client(settings_from(imports))


ContextOption = Annotated[
    str, typer.Option("--context", help="Background for the planner (goals only).")
]
WorkerTypeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--worker-types",
        "--worker-type",
        "-w",
        help="Worker types the plan may use: repeatable or comma-separated (default: all).",
        callback=lambda values: split_commas(values),
    ),
]


def split_commas(values: list[str] | None) -> list[str] | None:
    """``-w a,b -w c`` as ``[a, b, c]``."""
    if not values:
        return values
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


MaxNodesOption = Annotated[
    int | None,
    typer.Option("--max-nodes", min=1, help="Most nodes in the planned DAG (goals only)."),
]
MaxDepthOption = Annotated[
    int | None,
    typer.Option("--max-depth", min=1, help="Longest dependency chain of the plan (goals only)."),
]
BudgetOption = Annotated[
    int | None,
    typer.Option("--budget-tokens", min=1, help="LLM tokens the whole run may spend."),
]
BudgetInputOption = Annotated[
    int | None,
    typer.Option("--budget-input-tokens", min=1, help="LLM input tokens the run may spend."),
]
BudgetOutputOption = Annotated[
    int | None,
    typer.Option("--budget-output-tokens", min=1, help="LLM output tokens the run may spend."),
]


def positive(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise typer.BadParameter(f"{value} is not above 0")
    return value


BudgetUsdOption = Annotated[
    float | None,
    typer.Option("--budget-usd", help="USD the run's LLM calls may cost.", callback=positive),
]


def budget_from(
    tokens: int | None, input_tokens: int | None, output_tokens: int | None, usd: float | None
) -> Budget | None:
    """The run budget the --budget-* flags set (None: none of them)."""
    budget = Budget(
        max_total_tokens=tokens,
        max_input_tokens=input_tokens,
        max_output_tokens=output_tokens,
        max_cost_usd=usd,
    )
    return budget if budget.is_set else None


InputOption = Annotated[
    list[str] | None,
    typer.Option(
        "--input",
        help="A run input, key=value (repeatable): the value is read as JSON if it parses, "
        "else as text (always as text for an input the plan types as a string).",
    ),
]
InputsFileOption = Annotated[
    Path | None,
    typer.Option(
        "--inputs", help="The run's inputs from a JSON or YAML file (--input wins per key)."
    ),
]


def inputs_from(
    pairs: list[str] | None,
    inputs_file: Path | None,
    schema: dict[str, Any] | None,
    settings: Settings,
) -> dict[str, Any] | None:
    """The run inputs the --inputs FILE and --input key=value flags give (None: neither)."""
    if not pairs and inputs_file is None:
        return None
    from dagwright.plans.files import load_inputs_file
    from dagwright.plans.run_inputs import parse_input_pairs

    given: dict[str, Any] = {}
    if inputs_file is not None:
        given.update(load_inputs_file(inputs_file, max_bytes=settings.limits.max_params_bytes))
    given.update(parse_input_pairs(pairs or [], schema))
    return given

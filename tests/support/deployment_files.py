"""Reading the deployment files of the repository (docker-compose.yml, the env examples,
Valkey's config) for the tests that check them against the code: tests/test_ops_files.py
and tests/test_helm_chart.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from dagwright.settings import Settings
from dagwright.workers import builtin_registry

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
# The keys of the Secret the Helm chart's pods read.
SECRETS_ENV_EXAMPLE = REPO / "ops" / "helm" / "secrets.env.example"
SETTINGS_VARIABLES = {f"DAGWRIGHT_{name.upper()}" for name in Settings.flat_fields()}
# The built-in worker types, which the deployment files run.
BUILT_IN = builtin_registry()
WORKER_TYPES = set(BUILT_IN.type_names())
# What dagwright needs of Valkey's configuration, wherever it is written.
REQUIRED_VALKEY = {"maxmemory-policy": "noeviction", "appendonly": "yes", "appendfsync": "everysec"}


class ComposeLoader(yaml.SafeLoader):
    """YAML with Compose's merge tags (`!reset`, `!override`), which override files use."""


def _merge_tag(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    assert isinstance(node, yaml.ScalarNode)
    return loader.construct_scalar(node)


for _tag in ("!reset", "!override"):
    ComposeLoader.add_constructor(_tag, _merge_tag)


def load_compose(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=ComposeLoader)


def services() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = load_compose()["services"]
    return found


def dagwright_services() -> dict[str, dict[str, Any]]:
    """The services running the dagwright image (their command is a dagwright command)."""
    return {
        name: service
        for name, service in services().items()
        if str(service.get("image", "")).startswith("dagwright:")
    }


def env_file_variables(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of an env file, commented-out examples included."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^#?\s*([A-Za-z_][A-Za-z0-9_-]*)=(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def config_directives(text: str) -> dict[str, str]:
    """The directives of a valkey.conf, as name -> value."""
    lines = (line.strip() for line in text.splitlines())
    pairs = (line.split(None, 1) for line in lines if line and not line.startswith("#"))
    return {pair[0]: pair[1] if len(pair) > 1 else "" for pair in pairs}


def calls_the_llm(command: list[str]) -> bool:
    """A worker serving the planner's queue or an agent type's queue."""
    if command[0] != "worker":
        return False
    served = command[command.index("--type") + 1]
    return served == "orchestrator" or BUILT_IN.get(served).kind == "agent"

"""MCP servers in the settings: what is refused, with a message saying what to change;
how they attach to agent types (offered, never allowed by attaching); their names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from dagwright import AgentSpec
from dagwright.errors import ConfigurationError
from dagwright.registry import build_registry
from dagwright.settings import Settings
from dagwright.workers.mcp.names import MAX_TOOL_NAME_CHARS, namespaced
from dagwright.workers.tools.policy import PolicyAction
from tests.support.cli import cli_env, dagwright, one_error_line

TIME = {"command": "mcp-server-time"}


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"mcp_servers": {"time": {}}}, "either `command`"),
        ({"mcp_servers": {"time": {**TIME, "url": "http://x/mcp"}}}, "either `command`"),
        ({"mcp_servers": {"time": {**TIME, "headers": {"A": "B"}}}}, "`headers` are for a `url`"),
        ({"mcp_servers": {"my_time": TIME}}, "lowercase letters, digits or '-'"),
        ({"agent_mcp": {"researcher": {"servers": ["time"]}}}, "unknown MCP server(s) time"),
        (
            {
                "mcp_servers": {"time": TIME},
                "agent_mcp": {
                    "researcher": {"servers": ["time"], "rules": [{"tool": "*", "action": "allow"}]}
                },
            },
            "rules of agent_mcp name MCP tools only",
        ),
    ],
)
def test_invalid_mcp_settings_are_refused_saying_what_to_change(
    settings: dict[str, object], said: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(said)):
        Settings(**settings)  # type: ignore[arg-type]


def test_attaching_offers_the_tools_and_its_rules_come_before_the_types_own() -> None:
    settings = Settings(
        mcp_servers={"time": TIME},
        agent_mcp={
            "writer": {
                "servers": ["time"],
                "rules": [{"tool": "mcp__time__*", "action": "require_approval"}],
            }
        },
    )
    registry = build_registry(settings)
    assert registry.get("writer").mcp_servers == ("time",)
    assert registry.get("researcher").mcp_servers == ()
    spec = registry.declaration("writer")
    assert isinstance(spec, AgentSpec) and spec.mcp_servers == ()  # the declaration, untouched


def test_an_attached_server_with_no_rule_is_denied_by_default() -> None:
    from dagwright.workers.mcp.attach import attached_spec

    settings = Settings(mcp_servers={"time": TIME}, agent_mcp={"writer": {"servers": ["time"]}})
    registry = build_registry(Settings())
    spec = attached_spec(registry, "writer", settings)
    assert spec is not None and spec.mcp_servers == ("time",)
    decision = spec.policy.decide("mcp__time__get_current_time", {"timezone": "UTC"})
    assert (decision.action, decision.rule) == (PolicyAction.DENY, None)
    assert spec.policy.decide("workspace_list", {}).action == PolicyAction.ALLOW  # its own rules


def test_an_agent_type_naming_an_unknown_server_or_an_unknown_type_is_a_configuration_error() -> (
    None
):
    with pytest.raises(ConfigurationError, match="agent_mcp names unknown worker type"):
        build_registry(
            Settings(mcp_servers={"time": TIME}, agent_mcp={"nobody": {"servers": ["time"]}})
        )
    from dagwright.workers.declarations import add_agent

    registry = build_registry(Settings())
    add_agent(
        registry,
        AgentSpec(name="historian", description="d", system_prompt="p", mcp_servers=("git",)),
    )
    from dagwright.workers.mcp.attach import attach_mcp_servers

    with pytest.raises(ConfigurationError, match=r"unknown MCP server.*git.*mcp_servers"):
        attach_mcp_servers(registry, Settings())


def test_the_cli_says_in_one_line_what_is_wrong_with_the_mcp_settings(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path, DAGWRIGHT_AGENT_MCP='{"researcher": {"servers": ["time"]}}')
    result = dagwright("worker-types", env=env)
    assert result.returncode == 2
    assert "unknown MCP server(s) time" in one_error_line(result)


def test_tool_names_are_namespaced_and_fit_the_messages_api_pattern() -> None:
    assert namespaced("time", "get_current_time") == "mcp__time__get_current_time"
    dotted, other = namespaced("db", "query.read"), namespaced("db", "query/read")
    assert dotted.startswith("mcp__db__query_read_") and dotted != other
    long = namespaced("db", "x" * 100)
    assert len(long) == MAX_TOOL_NAME_CHARS and long != namespaced("db", "x" * 99)

"""Tools and policies on their own: http_get's allow-list, timeouts, truncation, plugins."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagwright.errors import ConfigurationError, ToolError
from dagwright.registry import build_registry
from dagwright.settings import Settings
from dagwright.testing import ScriptedLLM
from dagwright.workers import (
    WorkerRegistry,
    add_declared,
    builtin_registry,
    tool,
    worker_type,
)
from dagwright.workers.agent_loop import AgentSpec
from dagwright.workers.tools.policy import PolicyAction, PolicyRule, ToolPolicy
from tests.support.agents import MemoryServices, agent_context


class Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/away":
            self.send_response(302)
            self.send_header("location", "http://example.invalid/")
            self.end_headers()
            return
        body = b"x" * 5000 if self.path == "/big" else b"hello page"
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def call(name: str, args: dict[str, Any], tmp_path: Path, **settings: Any) -> Any:
    registry = builtin_registry()
    ctx = agent_context(MemoryServices(ScriptedLLM([]), tmp_path), settings=Settings(**settings))
    tool_ = registry.tools.get(name)
    assert tool_ is not None
    return tool_.call(ctx, args)


def test_http_get_fetches_allowed_domains_only(site: str, tmp_path: Path) -> None:
    ok = call(
        "http_get",
        {"url": f"{site}/"},
        tmp_path,
        http_allowed_domains=["127.0.0.1"],
        egress_allow=["127.0.0.1"],
    )
    assert not ok.is_error
    assert ok.text == f"HTTP 200 text/plain {site}/\n\nhello page"
    refused = call("http_get", {"url": f"{site}/"}, tmp_path, http_allowed_domains=["example.com"])
    assert refused.is_error and "'127.0.0.1' is not an allowed domain" in refused.text
    nothing = call("http_get", {"url": f"{site}/"}, tmp_path)
    assert nothing.is_error and "may not fetch any domain" in nothing.text
    scheme = call(
        "http_get",
        {"url": "file:///etc/passwd"},
        tmp_path,
        http_allowed_domains=["127.0.0.1"],
        egress_allow=["127.0.0.1"],
    )
    assert scheme.is_error and "only http and https" in scheme.text


def test_http_get_goes_through_the_egress_filter(site: str, tmp_path: Path) -> None:
    # An allowed domain is not an allowed address: loopback stays refused unless the
    # deployment allow-lists it, whatever the URL calls it.
    port = site.rsplit(":", 1)[1]
    for host in ("127.0.0.1", "localhost", "2130706433", "0x7f.0.0.1", "127.1"):
        refused = call(
            "http_get", {"url": f"http://{host}:{port}/"}, tmp_path, http_allowed_domains=[host]
        )
        assert refused.is_error and "DAGWRIGHT_EGRESS_ALLOW" in refused.text, host
        assert "hello page" not in refused.text


def test_http_get_checks_every_redirect_and_caps_the_size(site: str, tmp_path: Path) -> None:
    away = call(
        "http_get",
        {"url": f"{site}/away"},
        tmp_path,
        http_allowed_domains=["127.0.0.1"],
        egress_allow=["127.0.0.1"],
    )
    assert away.is_error and "'example.invalid' is not an allowed domain" in away.text
    big = call(
        "http_get",
        {"url": f"{site}/big"},
        tmp_path,
        http_allowed_domains=["127.0.0.1"],
        egress_allow=["127.0.0.1"],
        http_max_bytes=1024,
    )
    assert big.text.endswith("x" * 1024 + "\n[... the page is larger than 1024 bytes: cut here]")


def test_an_error_is_cut_at_the_output_limit_as_a_result_is(tmp_path: Path) -> None:
    registry = WorkerRegistry()

    def refuses() -> str:
        raise ToolError("r" * 100)

    def crashes() -> str:
        raise RuntimeError("c" * 100)

    def takes(count: int) -> str:
        return str(count)

    for func in (refuses, crashes, takes):
        registry.tools.register(func, max_output_chars=10)
    ctx = agent_context(MemoryServices(ScriptedLLM([]), tmp_path))
    refused = registry.tools.get("refuses").call(ctx, {})  # type: ignore[union-attr]
    assert refused.is_error and refused.text == "r" * 10 + "\n[... truncated 90 characters]"
    crashed = registry.tools.get("crashes").call(ctx, {})  # type: ignore[union-attr]
    assert crashed.is_error and crashed.text.startswith("RuntimeErr\n[... truncated 104")
    invalid = registry.tools.get("takes").call(ctx, {"count": "z" * 1000})  # type: ignore[union-attr]
    assert invalid.is_error and len(invalid.text) < 100


def test_a_slow_tool_times_out_and_long_output_is_truncated(tmp_path: Path) -> None:
    registry = WorkerRegistry()

    def slow() -> str:
        time.sleep(5)  # a tool slower than its timeout: the behaviour under test
        return "late"

    def chatty() -> str:
        return "y" * 100

    registry.tools.register(slow, timeout_s=0.2)
    registry.tools.register(chatty, max_output_chars=10)
    ctx = agent_context(MemoryServices(ScriptedLLM([]), tmp_path))
    started = time.monotonic()
    outcome = registry.tools.get("slow").call(ctx, {})  # type: ignore[union-attr]
    assert outcome.is_error and "did not finish within 0.2s" in outcome.text
    assert time.monotonic() - started < 2
    assert (
        registry.tools.get("chatty").call(ctx, {}).text
        == "y" * 10 + "\n[... truncated 90 characters]"
    )  # type: ignore[union-attr]


def test_tool_arguments_are_typed_and_their_schema_is_generated(tmp_path: Path) -> None:
    registry = builtin_registry()
    write = registry.tools.get("workspace_write")
    assert write is not None
    schema = write.schema()
    assert schema["input_schema"]["required"] == ["path", "content"]
    ctx = agent_context(MemoryServices(ScriptedLLM([]), tmp_path))
    bad = write.call(ctx, {"path": "a.md"})
    assert bad.is_error and "input.content: Field required" in bad.text


def test_policy_rules_match_argument_values_and_the_first_match_wins() -> None:
    policy = ToolPolicy(
        rules=[
            PolicyRule(
                tool="http_get",
                action=PolicyAction.ALLOW,
                when={"url": "https://docs.python.org/*"},
            ),
            PolicyRule(tool="http_get", action=PolicyAction.REQUIRE_APPROVAL),
            PolicyRule(tool="*", action=PolicyAction.ALLOW, when={"n": "[0-9]"}),
        ]
    )
    assert (
        policy.decide("http_get", {"url": "https://docs.python.org/3/"}).action
        == PolicyAction.ALLOW
    )
    assert policy.decide("http_get", {"url": "https://evil.test/"}).rule == 1
    assert policy.decide("other", {"n": 7}).action == PolicyAction.ALLOW
    assert policy.decide("other", {"n": 70}).action == PolicyAction.DENY
    assert policy.decide("other", {}).rule is None


def test_users_register_tools_agents_and_python_worker_types() -> None:
    registry = WorkerRegistry()

    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return term

    spec = AgentSpec(
        name="scout",
        description="d",
        system_prompt="p",
        tools=("lookup",),
        policy=ToolPolicy.allowing("lookup"),
    )

    @worker_type(name="shout", description="Upper-cases its instruction.")
    def shout(ctx: Any, node: Any) -> str:
        return str(node.instruction).upper()

    add_declared(registry, [spec, shout, lookup])  # types after the tools they use
    registered = registry.get("scout")
    assert (registered.queue, registered.kind, registered.tools) == (
        "dw.scout",
        "agent",
        ("lookup",),
    )
    assert registry.get("shout").kind == "custom"
    assert registry.tools.get("lookup").description == "Look a term up."  # type: ignore[union-attr]


def install_plugin(where: Path, module: str, code: str, entry_point: str) -> None:
    """A package installed in ``where`` with one ``dagwright.workers`` entry point."""
    (where / f"{module}.py").write_text(code)
    dist = where / f"{module}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[dagwright.workers]\n{entry_point}\n")


def test_installed_plugins_register_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_plugin(
        tmp_path,
        "myplugin",
        "def register(registry):\n"
        "    registry.functions.register(lambda: 'hi', name='plugin_hello')\n",
        "hello = myplugin:register",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = build_registry(Settings())
    assert registry.functions.get("plugin_hello") is not None


def test_an_entry_point_may_name_an_agent_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_plugin(
        tmp_path,
        "agentplugin",
        "from dagwright import AgentSpec\n"
        "scout = AgentSpec(name='scout', description='d', system_prompt='p',\n"
        "                  tools=('read_input',))\n",
        "scout = agentplugin:scout",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert build_registry(Settings()).get("scout").queue == "dw.scout"
    assert build_registry(Settings()).get("scout").queue == "dw.scout"  # each build anew


def test_a_bad_entry_point_is_a_configuration_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_plugin(tmp_path, "badplugin", "answer = 42\n", "numbers = badplugin:answer")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"entry point 'numbers' \(badplugin:answer\)"):
        build_registry(Settings())

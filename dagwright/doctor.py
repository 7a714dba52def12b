"""``dagwright doctor``: can this deployment run plans? One check per concern.

Each check has a status, a one-line detail and, short of ok, a hint saying what to do:

- ``ok``; ``warn``: runs work, but something will bite (no persistence, pending dead
  letters); ``fail``: runs cannot work (Redis down, no worker, an open breaker);
  ``skip``: not checked, because what it reads (the state store) could not be reached.

The checks only read. Reachability is probed with a client that does not retry, so that
an unreachable server is reported in seconds; the runtime's clients retry for a while
before giving up, which suits workers but not a health check. A check that fails to read
what it needs becomes a failed check, never an exception: the doctor must report.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from dagwright.brokers import BrokerKind, broker_kind
from dagwright.brokers.amqp import (
    CONSUMER_TIMEOUT_ARGUMENT,
    amqp_connection,
    consumer_arguments,
    honours_consumer_timeout,
)
from dagwright.connection import (
    TLS_HINT,
    connect,
    failed_tls_handshake,
    redact_url,
    resolve_redis_url,
)
from dagwright.dlq import DeadLetterStats, DeadLetterStatus
from dagwright.errors import ConfigurationError, RetiredModelError
from dagwright.keys import ORCHESTRATOR_QUEUE, ORCHESTRATOR_TYPE
from dagwright.llm.model_ids import unpriced
from dagwright.llm.model_lifecycle import check_configured_models
from dagwright.orchestrator.broker import Broker
from dagwright.orchestrator.control.dead_letter_replay import dead_letters
from dagwright.orchestrator.control.runnable import LiveCapabilities
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.priced_models import models_of_types
from dagwright.redaction import known_secrets
from dagwright.resilience.breakers import Breakers, BreakerStatus
from dagwright.sandbox.choice import candidate_names, probe
from dagwright.sandbox.seccomp import missing_filter_warning
from dagwright.schedules.store import schedule_store
from dagwright.settings import RedisSettings, Settings
from dagwright.skills.library import SkillLibrary
from dagwright.workers import WorkerRegistry
from dagwright.workers.capabilities import LLM_KINDS, WorkerCapabilities

if TYPE_CHECKING:
    from dagwright.workers.mcp.probe import ServerProbe

PROBE_TIMEOUT_S = 3.0
STATE_CHECKS = ("workers", "reconciler", "breakers", "dlq", "beat")  # they read the state store
EVICTION_HINT = "set maxmemory-policy noeviction: evicting keys would drop run state"
NO_AOF = ("appendonly is off", "set appendonly yes: a restart loses what the last snapshot missed")
NO_PERSISTENCE = (
    "no persistence (no AOF, no snapshots)",
    "set appendonly yes: a restart loses every run",
)


class Status(enum.StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""  # what to do about a warn or fail

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint}


def ok(name: str, detail: str) -> Check:
    return Check(name, Status.OK, detail)


def warn(name: str, detail: str, hint: str) -> Check:
    return Check(name, Status.WARN, detail, hint)


def fail(name: str, detail: str, hint: str = "") -> Check:
    return Check(name, Status.FAIL, detail, hint)


def skip(name: str, detail: str) -> Check:
    return Check(name, Status.SKIP, detail)


def healthy(checks: list[Check]) -> bool:
    """Nothing failed (warnings allowed)."""
    return all(check.status != Status.FAIL for check in checks)


def diagnose(settings: Settings) -> list[Check]:
    """Every check, in a fixed order: redis, broker, workers (and problem queues),
    reconciler, breakers, dlq, beat, sandbox, llm, skills, models, then one per MCP server, and
    the trace export if an OTLP endpoint is set."""
    url = resolve_redis_url(settings)
    redis_check = check_redis(url, settings.redis)
    reachable = url is not None and redis_check.status != Status.FAIL
    broker_url = settings.redis.broker_url or url
    if broker_url == url and not reachable:
        broker_check = skip("broker", "not checked: the same server as Redis")
    else:
        broker_check = check_broker(broker_url, settings.redis, settings.limits.max_timeout_s)
    if url and reachable:
        state = state_checks_at(settings, url, broker_ok=broker_check.status != Status.FAIL)
    else:
        state = [skip(name, "not checked without Redis") for name in STATE_CHECKS]
    local = [
        check_sandbox(sandbox_probes(settings)),
        *guarded("sandbox-memory", lambda: [check_sandbox_memory(settings)]),
        *guarded("sandbox-packages", lambda: [check_sandbox_packages(settings)]),
        check_llm(settings),
    ]
    return [
        redis_check,
        broker_check,
        *state,
        *local,
        *skill_checks(settings),
        *guarded("models", lambda: [check_model_lifecycle(settings, configured_models(settings))]),
        *guarded("mcp", lambda: mcp_checks(settings)),
        *check_otlp(settings),
    ]


# Reachability: the state store and the broker.


def probe_client(url: str, access: RedisSettings) -> redis.Redis:
    return connect(
        url,
        access,
        socket_connect_timeout=PROBE_TIMEOUT_S,
        socket_timeout=PROBE_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )


def unreachable(name: str, what: str, url: str, exc: Exception, hint: str) -> Check:
    if isinstance(exc, redis.AuthenticationError):
        return fail(
            name,
            f"{what} at {redact_url(url)} refused the credentials",
            "check the user and password (in the URL, or DAGWRIGHT_REDIS_USERNAME / "
            "DAGWRIGHT_REDIS_PASSWORD)",
        )
    if isinstance(exc, ConfigurationError):
        return fail(name, str(exc), "fix the URL, or the DAGWRIGHT_REDIS_* settings")
    if failed_tls_handshake(exc):
        return fail(name, f"cannot reach {what} at {redact_url(url)}: {exc}", TLS_HINT)
    if isinstance(exc, ValueError):
        return fail(name, f"invalid {what} URL {redact_url(url)!r}: {exc}", hint)
    return fail(name, f"cannot reach {what} at {redact_url(url)}: {exc}", hint)


def check_redis(url: str | None, access: RedisSettings) -> Check:
    """The state store answers PING, and keeps what it is given (no eviction, persistence)."""
    if not url:  # a fresh machine: nothing is wrong, `run` brings its own
        return skip(
            "redis",
            "none configured: `dagwright run` starts an embedded stack for its command; "
            "`dagwright up` keeps one running, DAGWRIGHT_REDIS_URL names a server",
        )
    try:
        with probe_client(url, access) as client:
            client.ping()
            problems = persistence_problems(client)
    except (redis.RedisError, ValueError, ConfigurationError) as exc:
        hint = "is it running? check DAGWRIGHT_REDIS_URL (`dagwright up` starts a local one)"
        return unreachable("redis", "Redis", url, exc, hint)
    if not problems:
        return ok("redis", f"reachable at {redact_url(url)}")
    details, hints = zip(*problems, strict=True)
    return warn(
        "redis",
        f"reachable at {redact_url(url)}; " + "; ".join(details),
        "; ".join(hints),
    )


def server_config(client: redis.Redis, name: str) -> str | None:
    """A CONFIG value, or None where CONFIG is disabled (managed Redis): nothing to check."""
    try:
        value = client.config_get(name).get(name)
    except redis.ResponseError:
        return None
    return str(value) if value is not None else None


def persistence_problems(client: redis.Redis) -> list[tuple[str, str]]:
    """(detail, hint) of each server setting that could lose run state."""
    problems = []
    policy = server_config(client, "maxmemory-policy")
    if policy not in (None, "noeviction"):
        problems.append((f"maxmemory-policy is {policy}", EVICTION_HINT))
    if server_config(client, "appendonly") == "no":
        snapshots = server_config(client, "save") != ""
        problems.append(NO_AOF if snapshots else NO_PERSISTENCE)
    return problems


def check_broker(url: str | None, access: RedisSettings, max_timeout_s: float = 0.0) -> Check:
    """The Celery broker answers: a Redis server (by default the state store) PING, a
    RabbitMQ the AMQP handshake. ``max_timeout_s``: the longest node timeout, which an
    older RabbitMQ's consumer timeout must exceed."""
    if not url:
        return fail(
            "broker",
            "no broker configured",
            "set DAGWRIGHT_BROKER_URL (unset: the same server as DAGWRIGHT_REDIS_URL)",
        )
    if broker_kind(url) is BrokerKind.AMQP:
        return check_rabbitmq(url, max_timeout_s)
    try:
        with probe_client(url, access) as client:
            client.ping()
    except (redis.RedisError, ValueError, ConfigurationError) as exc:
        hint = "is it running? check DAGWRIGHT_BROKER_URL (unset: DAGWRIGHT_REDIS_URL)"
        return unreachable("broker", "the broker", url, exc, hint)
    return ok("broker", f"reachable at {redact_url(url)}")


def check_rabbitmq(url: str, max_timeout_s: float) -> Check:
    """RabbitMQ answers; one older than 3.12 (which ignores the consumer timeout each
    dagwright consumer asks for) is a warning, with the server setting to raise."""
    try:
        with amqp_connection(url, timeout_s=PROBE_TIMEOUT_S) as connection:
            version = str(connection.connection.server_properties.get("version", ""))
    except Exception as exc:  # kombu's and py-amqp's errors: each is "cannot reach"
        hint = "is it running? check the host, port, user and vhost in DAGWRIGHT_BROKER_URL"
        return fail("broker", f"cannot reach RabbitMQ at {redact_url(url)}: {exc}", hint)
    detail = f"RabbitMQ {version or '(version unknown)'} reachable at {redact_url(url)}"
    if version and not honours_consumer_timeout(version):
        timeout_ms = consumer_arguments(max_timeout_s)[CONSUMER_TIMEOUT_ARGUMENT]
        return warn(
            "broker",
            f"{detail}; it ignores the consumer timeout workers ask for (3.11.15+ honours it)",
            f"make sure rabbitmq.conf sets consumer_timeout = {timeout_ms} (ms) or more: "
            "else a node running past its 30 minutes' default has its worker's channel closed",
        )
    return ok("broker", detail)


# What the state store says: workers, reconciler, breakers, dead letters.


def state_checks_at(settings: Settings, url: str, *, broker_ok: bool) -> list[Check]:
    from dagwright.app import broker_identity
    from dagwright.tasks import CeleryBroker, build_app  # Celery, only to check the broker

    runtime = Runtime.from_settings(settings.model_copy(update={"redis_url": url}))
    app = build_app(runtime.settings)
    broker = CeleryBroker(app) if broker_ok else None
    return state_checks(runtime, broker, broker_identity(app.conf.broker_url))


def state_checks(runtime: Runtime, broker: Broker | None, client_broker: str = "") -> list[Check]:
    """The checks that read the state store; ``broker`` None: it is unreachable.
    ``client_broker``: this client's broker (``app.broker_identity``), "" if unknown."""
    return [
        *guarded("workers", lambda: fleet_checks(read_fleet(runtime, broker))),
        *guarded("workers", lambda: capability_checks(runtime, client_broker)),
        *guarded("reconciler", lambda: [check_reconciler(runtime)]),
        *guarded("breakers", lambda: [check_breakers(runtime.breakers)]),
        *guarded("dlq", lambda: [check_dlq(dead_letters(runtime).stats())]),
        *guarded("beat", lambda: [check_beat(runtime)]),
    ]


def check_beat(runtime: Runtime) -> Check:
    """A beat holds its lock, if any schedule is active: else nothing fires them."""
    active = sum(1 for schedule in schedule_store(runtime).all() if not schedule.paused)
    if runtime.client.exists(runtime.keys.beat_lock):
        return ok("beat", f"a beat is active · {plural(active, 'active schedule')}")
    if not active:
        return ok("beat", "no active schedules, no beat needed")
    return warn(
        "beat",
        f"{plural(active, 'active schedule')} but no beat is running: they do not fire",
        "start `dagwright beat` (two for failover), or `dagwright up` on one machine",
    )


def guarded(name: str, checks: Callable[[], list[Check]]) -> list[Check]:
    """The checks made, or one failed check if what they read could not be read."""
    try:
        return checks()
    except Exception as exc:  # a doctor reports what it cannot read; it never crashes
        return [fail(name, f"could not check: {type(exc).__name__}: {exc}")]


@dataclass(frozen=True)
class Fleet:
    """The live workers (from their presence records) and the queues they should serve."""

    workers: dict[str, frozenset[str]]  # hostname -> queues it consumes
    queues: dict[str, list[str]]  # queue -> the worker types it serves (none: orchestrator)
    depths: dict[str, int | None]  # queue -> messages waiting (None: unknown)

    def consumers(self, queue: str) -> int:
        return sum(queue in queues for queues in self.workers.values())

    def waiting(self) -> int | None:
        """Messages waiting in every queue, None if a depth is unknown."""
        depths = list(self.depths.values())
        return None if None in depths else sum(depth or 0 for depth in depths)


def read_fleet(runtime: Runtime, broker: Broker | None) -> Fleet:
    queues = registered_queues(runtime.registry)
    depths = {queue: broker.queue_depth(queue) if broker else None for queue in queues}
    return Fleet(live_workers(runtime), queues, depths)


def live_workers(runtime: Runtime) -> dict[str, frozenset[str]]:
    """Hostname -> queues of every worker whose presence record has not expired."""
    keys = sorted(runtime.client.scan_iter(runtime.keys.worker_heartbeat_pattern, count=500))
    pipe = runtime.client.pipeline(transaction=False)
    for key in keys:
        pipe.hget(key, "queues")
    prefix = runtime.keys.worker_heartbeat("")
    return {
        key.removeprefix(prefix): frozenset(queues.split(","))
        for key, queues in zip(keys, pipe.execute(), strict=True)
        if queues is not None
    }


def capability_checks(runtime: Runtime, client_broker: str = "") -> list[Check]:
    """One line per live worker: what it can run, as a submit sees it (a plan no live
    worker can run is refused there: orchestrator/control/runnable.py), and whether it
    consumes from this client's broker."""
    workers = LiveCapabilities(runtime).read(fresh=True)
    llm_types = {wt.name for wt in runtime.registry.types(include_internal=True)}
    llm_types = {name for name in llm_types if runtime.registry.get(name).kind in LLM_KINDS}
    return [
        check_capabilities(hostname, capabilities, llm_types, client_broker)
        for hostname, capabilities in sorted(workers.items())
    ]


def check_capabilities(
    hostname: str, capabilities: WorkerCapabilities, llm_types: set[str], client_broker: str = ""
) -> Check:
    def listed(names: Iterable[str]) -> str:
        return ", ".join(sorted(names)) or "none"

    name = f"worker {hostname}"
    detail = (
        f"types: {listed(capabilities.worker_types)} · "
        f"functions: {listed(capabilities.functions)} · "
        f"imports: {listed(capabilities.imports)} · LLM: {capabilities.llm or 'none'}"
    )
    hints = [*llm_hints(capabilities, llm_types), *broker_hints(capabilities, client_broker)]
    return warn(name, detail, "; ".join(hints)) if hints else ok(name, detail)


def llm_hints(capabilities: WorkerCapabilities, llm_types: set[str]) -> list[str]:
    starved = sorted(capabilities.worker_types & llm_types) if not capabilities.llm else []
    if not starved:
        return []
    return [
        f"its {', '.join(starved)} nodes cannot call a model: set ANTHROPIC_API_KEY or "
        "ANTHROPIC_BASE_URL in its environment and restart it (`up`'s: stop `dagwright up` "
        "and start it again with the variable set)"
    ]


def broker_hints(capabilities: WorkerCapabilities, client_broker: str) -> list[str]:
    """A worker on another broker than this client's never gets the messages it publishes:
    its nodes wait (the state store, which they share, is how doctor sees the worker)."""
    if not capabilities.broker or not client_broker or capabilities.broker == client_broker:
        return []
    return [
        f"it consumes from broker {capabilities.broker}, this client publishes to "
        f"{client_broker}: set the same DAGWRIGHT_BROKER_URL for both (unset: "
        "DAGWRIGHT_REDIS_URL)"
    ]


def registered_queues(registry: WorkerRegistry) -> dict[str, list[str]]:
    """The orchestrator queue (planning, reconciling), one per public worker type and one
    per function queue (``function:<queue>``)."""
    queues: dict[str, list[str]] = {ORCHESTRATOR_QUEUE: []}
    for name, queue in registry.served_queues().items():
        queues.setdefault(queue, []).append(name)  # function:<queue> for a function queue
    return queues


def fleet_checks(fleet: Fleet) -> list[Check]:
    return [check_workers(fleet), *check_queues(fleet)]


def check_workers(fleet: Fleet) -> Check:
    waiting = fleet.waiting()
    backlog = "queue depths unknown" if waiting is None else f"{plural(waiting, 'message')} waiting"
    if not fleet.workers:
        return fail("workers", f"no live workers ({backlog})", "start one with `dagwright worker`")
    served = sum(1 for queue in fleet.queues if fleet.consumers(queue))
    return ok(
        "workers",
        f"{plural(len(fleet.workers), 'live worker')} · "
        f"{served}/{len(fleet.queues)} queues served · {backlog}",
    )


def check_queues(fleet: Fleet) -> list[Check]:
    """One check per queue no live worker consumes (none without any worker: the workers
    check says it all)."""
    if not fleet.workers:
        return []
    return [
        check_unserved_queue(queue, types, fleet.depths[queue])
        for queue, types in fleet.queues.items()
        if not fleet.consumers(queue)
    ]


def check_unserved_queue(queue: str, worker_types: list[str], depth: int | None) -> Check:
    flags = "".join(f" -t {name}" for name in worker_types or [ORCHESTRATOR_TYPE])
    hint = f"start a worker for it: `dagwright worker{flags}`"
    if depth:
        return fail(
            f"queue {queue}",
            f"{plural(depth, 'message')} waiting and no live worker consumes it",
            hint,
        )
    return warn(f"queue {queue}", "no live worker consumes it: its nodes would wait", hint)


def check_reconciler(runtime: Runtime) -> Check:
    """A reconciler holds bucket 0 (its lease is renewed every pass; a dead holder's is
    taken over): lost work gets re-queued. How many share the runs, from their presence."""
    keys = runtime.keys
    pipe = runtime.client.pipeline(transaction=False)
    pipe.exists(keys.reconciler_bucket_lease(0))
    pipe.zcard(keys.reconcilers)
    held, live = pipe.execute()
    if held:
        return ok("reconciler", f"{plural(max(int(live), 1), 'reconciler')} active")
    every = runtime.settings.dispatch.reconcile_interval_s * 3
    return warn(
        "reconciler",
        f"no reconciler ran in the last {every:g}s: "
        "work of dead workers and lost messages is not recovered",
        "start `dagwright reconciler` (every `dagwright worker` runs one too, unless "
        "started with --no-reconciler)",
    )


def check_breakers(breakers: Breakers) -> Check:
    return breaker_check(breakers.statuses())  # reads only: a check must not write


def breaker_check(statuses: list[BreakerStatus]) -> Check:
    """Fail on an open breaker, warn on one probing (half-open, or open with its time up)."""
    still_open = [s for s in statuses if s.state == "open" and s.open_for_s > 0]
    probing = [s for s in statuses if s.state != "closed" and s not in still_open]
    if still_open:
        names = ", ".join(f"{s.name} ({s.open_for_s:.0f}s left)" for s in still_open)
        return fail(
            "breakers",
            f"open: {names}",
            "calls through an open breaker fail fast: is that dependency down or rate-limiting?",
        )
    if probing:
        return warn(
            "breakers",
            "half-open: " + ", ".join(s.name for s in probing),
            "it closes after a successful probe, or opens again",
        )
    if not statuses:
        return ok("breakers", "none in use yet")
    return ok("breakers", f"{plural(len(statuses), 'breaker')} closed")


def check_dlq(stats: DeadLetterStats) -> Check:
    pending = stats.by_status.get(DeadLetterStatus.PENDING, 0)
    if pending:
        return warn(
            "dlq",
            plural(pending, "pending dead letter"),
            "inspect with `dagwright dlq list`, then `dagwright dlq replay` or purge",
        )
    done = f" ({stats.total} replayed or purged)" if stats.total else ""
    return ok("dlq", f"no pending dead letters{done}")


# Local: the sandbox backends and the LLM.


def sandbox_probes(settings: Settings) -> dict[str, str]:
    """Each backend this host could use and why not ("" when it passes its self-test)."""
    sandbox = settings.sandbox
    return {
        name: found if isinstance(found := probe(name, sandbox), str) else ""
        for name in candidate_names(sandbox)
    }


def check_sandbox(probes: dict[str, str]) -> Check:
    """At least one backend passes its self-test (on this host: workers may differ); a
    working bubblewrap with no seccomp filter for this machine's architecture warns."""
    working = [name for name, problem in probes.items() if not problem]
    if not working:
        return warn(
            "sandbox",
            "no sandbox backend works here: " + "; ".join(probes.values()),
            "python nodes and run_python are refused until one does: start Docker with the "
            "sandbox image, or allow unprivileged user namespaces for bubblewrap",
        )
    works = "works: " + ", ".join(working)
    if "bubblewrap" in working and (unfiltered := missing_filter_warning()):
        return warn(
            "sandbox",
            f"{works}; {unfiltered}",
            "its namespaces, rlimits and cgroups still apply, but every system call is open "
            "to the code: prefer the docker backend here (DAGWRIGHT_SANDBOX_BACKEND=docker)",
        )
    return ok("sandbox", works)


def check_sandbox_memory(settings: Settings) -> Check:
    """Which bound holds a run's memory: docker's container cgroup; for bubblewrap a
    memory cgroup, else the split over tasks (it warns: each process gets a share), or
    the refusal to run code (``sandbox/memory_fallback.py``)."""
    from dagwright.sandbox.base import Limits
    from dagwright.sandbox.bubblewrap import BubblewrapSandbox

    name, sandbox = "sandbox-memory", settings.sandbox
    if "bubblewrap" not in candidate_names(sandbox):
        return ok(name, f"docker: the container's cgroup holds each run to {sandbox.memory_mb} MiB")
    limits = Limits.from_settings(sandbox)
    bound = BubblewrapSandbox.from_settings(sandbox).memory_bound(limits)
    detail = f"bubblewrap: {bound.describe()}"
    if bound.cgroup:
        return ok(name, detail)
    whole_tree = (
        "set sandbox_cgroup_parent to a cgroup v2 directory delegated to the worker (memory "
        "and pids controllers), or run the worker as root, for a whole-tree limit"
    )
    if bound.refused:
        return warn(name, detail, f"bubblewrap refuses python nodes here: {whole_tree}")
    return warn(name, detail, f"a process may use only its share: {whole_tree}")


def check_sandbox_packages(settings: Settings) -> Check:
    """``sandbox_packages`` declared but not installed for bubblewrap warns; else what the
    sandbox says it has (the line run_python's description and the coder's prompt get)."""
    from dagwright.sandbox.environment import describe_sandbox
    from dagwright.sandbox.packages import packages_python

    name, sandbox = "sandbox-packages", settings.sandbox
    if not sandbox.packages:
        return ok(name, "none declared (sandbox_packages): the standard library")
    local = "bubblewrap" in candidate_names(sandbox) and sandbox.python == "system"
    if local and packages_python(sandbox) is None:
        return warn(
            name,
            f"declared but not installed in {sandbox.packages_dir}: {', '.join(sandbox.packages)}",
            "run `dagwright sandbox install` (docker: build the image with SANDBOX_PACKAGES)",
        )
    return ok(name, describe_sandbox(sandbox))


def check_llm(settings: Settings) -> Check:
    """An API key or an endpoint is configured (the key itself is never shown); Bedrock
    and Vertex AI find their credentials in the environment, when a call is made."""
    if settings.llm.provider != "anthropic":
        region = f" in {settings.llm.region}" if settings.llm.region else ""
        return ok("llm", f"{settings.llm.provider}{region} · model {settings.llm.default_model}")
    if not (settings.llm.api_key or settings.llm.base_url):
        return warn(
            "llm",
            "no Anthropic API key: agent nodes and goals cannot run",
            "set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL, e.g. to `dagwright fake-llm`)",
        )
    parts = ["API key set"] if settings.llm.api_key else []
    if settings.llm.base_url:
        parts.append(f"endpoint {redact_url(settings.llm.base_url)}")
    parts.append(f"model {settings.llm.default_model}")
    if settings.planner.model and settings.planner.model != settings.llm.default_model:
        parts.append(f"planner model {settings.planner.model}")
    models = {settings.llm.default_model, settings.planner.model or settings.llm.default_model}
    missing = unpriced(models, settings.llm.model_prices)
    if missing:
        return warn(
            "llm",
            f"{' · '.join(parts)}; no price for {', '.join(missing)}: its cost shows as "
            "unknown and a USD budget on it is refused",
            "add its USD per million tokens to model_prices (DAGWRIGHT_MODEL_PRICES)",
        )
    return ok("llm", " · ".join(parts))


def configured_models(settings: Settings) -> dict[str, str]:
    """The model of each user of one: the default, the planner, every agent type."""
    from dagwright.registry import build_registry  # imports the user's modules

    types = build_registry(settings).types(include_internal=True)
    return {
        "default_model": settings.llm.default_model,
        "planner": settings.planner.model or settings.llm.default_model,
        **models_of_types(types, settings),
    }


def check_model_lifecycle(settings: Settings, models_by_user: dict[str, str]) -> Check:
    """Fails for a model past its end of life (every call to it fails), warns for one
    within 30 days of it; each line names the replacement."""
    try:
        warnings = check_configured_models(models_by_user.values(), settings)
    except RetiredModelError as exc:
        return fail("models", str(exc), "configure the replacement it names")
    if warnings:
        return warn("models", "; ".join(warnings), "move to the replacement before that day")
    models = sorted(set(models_by_user.values()))
    return ok("models", f"{', '.join(models)}: none near its end of life")


def skill_checks(settings: Settings) -> list[Check]:
    """The skills of ``skill_dirs``: each SKILL.md is one the specification allows, and
    every skill an agent type is given exists (as a worker checks when it starts)."""
    if not settings.skills.dirs and not settings.skills.agent_skills:
        return []
    from dagwright.registry import build_registry

    try:
        registry = build_registry(settings)
    except ConfigurationError as exc:
        return [
            fail(
                "skills",
                str(exc),
                "fix the skill (docs/skills.md): until then, workers refuse to start",
            )
        ]
    given = [f"{wt.name} ({', '.join(wt.skills)})" for wt in registry.types() if wt.skills]
    library = SkillLibrary.from_settings(settings)
    found = f"{plural(len(library.skills), 'skill')}: {', '.join(library.names()) or 'none'}"
    if not given:
        hint = 'attach them: [agent_skills] researcher = ["<skill>"]'
        return [warn("skills", f"{found} · given to no agent type", hint)]
    return [ok("skills", f"{found} · given to {'; '.join(given)}")]


def mcp_checks(settings: Settings) -> list[Check]:
    """One check per declared MCP server: it answers (started here, as a worker would
    start it, then stopped) with its tools, and which agent types have it."""
    if not settings.mcp.servers:
        return []
    from dagwright.registry import build_registry
    from dagwright.workers.mcp.probe import probe_servers

    users: dict[str, list[str]] = {server: [] for server in settings.mcp.servers}
    for worker_type in build_registry(settings).types():
        for server in worker_type.mcp_servers:
            users[server].append(worker_type.name)
    probes = probe_servers(settings.mcp.servers, settings.mcp.servers, known_secrets(settings))
    return [check_mcp_server(settings, server, probes[server], users[server]) for server in users]


def check_mcp_server(
    settings: Settings, server: str, probe: ServerProbe, types: list[str]
) -> Check:
    from dagwright.workers.mcp.probe import start_hint

    name = f"mcp {server}"
    config = settings.mcp.servers[server]
    if not probe.answers:
        return fail(name, f"does not answer: {probe.problem}", start_hint(server, config))
    tools = f"answers · {plural(len(probe.tools), 'tool')}"
    if not types:
        return warn(
            name,
            f"{tools} · attached to no agent type",
            f'attach it: [agent_mcp.<type>] servers = ["{server}"], and allow its tools '
            f'with rules = [{{tool = "mcp__{server}__*", action = "allow"}}]',
        )
    return ok(name, f"{tools} · attached to {', '.join(types)}")


def check_otlp(settings: Settings) -> list[Check]:
    """Whether traces reach the OTLP endpoint set: without the extra they are not
    exported (the workers log it once, where nobody looks)."""
    from dagwright.errors import MissingExtraError
    from dagwright.telemetry.otlp import otel_missing, traces_url

    if not settings.telemetry.otlp_endpoint:
        return []
    missing = otel_missing()
    if missing is None:
        return [ok("otlp", f"traces exported to {traces_url(settings.telemetry.otlp_endpoint)}")]
    problem = MissingExtraError.of(missing, "exporting traces (DAGWRIGHT_OTLP_ENDPOINT)")
    return [warn("otlp", f"traces are not exported: {problem}", "install the extra it names")]


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"

"""Every exception dagwright raises, in one tree split by who must react.

::

    DagwrightError
    ├── InputError                 the caller must fix something (CLI exit code 2)
    │   ├── PlanError              a plan file or plan object is malformed or invalid
    │   │   └── RunInputError      a run's inputs do not fit the plan's ``inputs:`` schema
    │   ├── UnknownRunError        no run with that id (or it expired)
    │   ├── UnknownNodeError       the run has no node with that id
    │   ├── DeadLetterError        no such dead letter, or it cannot be replayed
    │   │   ├── UnknownDeadLetterError  ... there is none with that id
    │   │   └── NotReplayableError      ... it cannot be replayed now (a ConflictError too)
    │   ├── ScheduleError          an invalid schedule (cron, timezone...), or none by that name
    │   │   └── UnknownScheduleError    ... there is none by that name
    │   ├── ApprovalError          no approval waits there, or the decision is malformed
    │   │   └── NotWaitingError    ... the node waits for no decision (a ConflictError too)
    │   ├── ConflictError          the thing exists, and its state forbids the action (409)
    │   ├── ScoreError             a run's score is malformed (its name, value or comment)
    │   │   └── ScoreLimitError    ... or its run holds run_scores_max scores already
    │   ├── UnknownEvalError       no eval with that id (or it expired)
    │   ├── UnknownMemoryError     no memory namespace by that name (or it expired)
    │   ├── UnpricedModelError     a USD budget, on nodes using a model the price table lacks
    │   ├── UnrunnablePlanError    live workers exist, and none can run some node of the plan
    │   ├── IdempotencyConflictError  the key names a run started with another request
    │   ├── RunOptionError     a submit keyword is unknown or of the wrong type (a TypeError)
    │   ├── EgressRefusedError     a URL points at loopback, private or metadata addresses
    │   └── ConfigurationError     settings are missing or contradictory
    │       ├── MissingExtraError  a feature's optional dependency is not installed
    │       └── MalformedSkillError  a skill folder's SKILL.md is not the specification's
    ├── BrokerUnavailableError     Redis/Valkey or the broker cannot be reached
    ├── RunError                   a run did not produce a result
    │   ├── RunFailedError         at least one node failed for good
    │   ├── RunCancelledError      the run was cancelled
    │   └── RunNotFinishedError    waited up to the timeout; the run is still going
    ├── ToolError                  a tool call failed: reported to the model, not raised on
    │   └── ToolTimeoutError       ... because it ran out of time (counts against its breaker)
    └── NodeError                  raised by worker code; decides what happens to a node
        ├── RetryableError         transient: retried with backoff (RetryPolicy)
        │   ├── LLMUnavailableError        the LLM API failed after its own retries
        │   ├── BreakerOpenError           a dependency's circuit is open: the node waits
        │   │                              out the open time, without spending an attempt
        │   ├── LLMRateLimitedError        the model's rate limit (llm_rate_limits) gave
        │   │                              no room within llm_rate_max_wait_s
        │   ├── LLMBatchPendingError       the node's call waits in a Message Batch: the
        │   │                              node is parked until the next poll, no attempt spent
        │   ├── TeamTaskPendingError       a celery_task node's task runs on the team's
        │   │                              workers: the node is parked, no slot held
        │   ├── TeamTaskFailedError        the team's task failed (its class name kept)
        │   ├── NodeTimeoutError           the node ran past its timeout_s (recorded by the
        │   │                              worker's watchdog; not retried for python nodes)
        │   ├── SandboxFailedError         the sandbox backend broke (not the code): retried,
        │   │                              counts against the sandbox's breaker
        │   ├── RateLimitWaitExpiredError  the node waited rate_limit_max_wait_s for its
        │   │                              rate limits (function or worker type)
        │   └── McpServerUnavailableError  an MCP server of the agent type did not start
        ├── PermanentError         retrying cannot help: the node fails at once
        │   ├── LLMNotConfiguredError      no API key / base URL: fails before any call
        │   ├── LLMEndpointUnreachableError  nothing answers at the configured endpoint
        │   │                              (refused, no such host) after the LLM retries
        │   ├── BreakerWaitExpiredError    waited breaker_max_wait_s on an open breaker
        │   ├── BatchWaitExpiredError      waited llm_batch_max_wait_s on a Message Batch
        │   ├── TeamAppError               the team's Celery app (DAGWRIGHT_CELERY_APP) is
        │   │                              missing, has no result backend, or is not JSON
        │   ├── LLMRequestError            the API refused the request (4xx) or the key
        │   ├── LLMResponseError           the API answered something unusable
        │   ├── LLMCallTooLargeError       one call could never fit the model's
        │   │                              tokens-per-minute limit
        │   ├── AgentMaxTurnsError         the agent used its turns without a final answer
        │   ├── AgentToolErrorsError       too many tool calls failed in a row
        │   │   └── ToolPolicyError        ... the last of them refused by the tool policy
        │   ├── AgentOutputError           no usable answer: cut off at the max_tokens cap,
        │   │                              refused (no fallback model), empty twice, or
        │   │                              the model's context window is full
        │   ├── PlanningFailedError        the planner gave no valid plan within its repairs
        │   ├── PoisonMessageError         the node killed its process on every delivery
        │   ├── WorkersLostError           its workers were lost max_worker_losses times
        │   ├── CodeExecutionError         sandboxed code failed (exit code, time or memory)
        │   ├── BudgetExceededError        the next LLM call could pass the token budget
        │   ├── ApprovalRejectedError      a person (or the timeout) rejected the node
        │   ├── SkillChangedError          a resumed node's skill is not the version it
        │                                  started with (dagwright/skills, decision 92)
        │   └── SandboxUnavailableError    no sandbox backend works here: code is refused,
        │                                  never run unsandboxed
        └── NodeLostError          the node was taken from this worker (re-queued or
                                   cancelled): stop quietly, nothing is recorded

Worker code may raise any exception. Anything that is not a ``NodeError`` counts as
retryable, as in Temporal: a flaky dependency is likelier than a deterministic bug, and a
bug still fails after ``max_attempts``. Foreign exceptions (redis, celery, pydantic) are
translated where they enter dagwright, so callers only ever catch these classes.
"""

from __future__ import annotations

from dagwright.shown_ids import shown_id


class DagwrightError(Exception):
    """Root of every error dagwright raises on purpose."""


class InputError(DagwrightError):
    """Bad input from the caller: a message a person can act on."""


class PlanError(InputError):
    """A plan is malformed or fails validation.

    Attributes:
        problems: every problem found, each a sentence that says what to fix.
    """

    def __init__(
        self, problems: list[str], *, source: str | None = None, listed_by: str | None = None
    ) -> None:
        self.problems = list(problems) or ["the plan is invalid"]
        self.source = source
        self.listed_by = listed_by
        super().__init__(self.summary())

    def summary(self) -> str:
        """One line: the first problem, how many more there are, and ``listed_by``, what
        lists them all (a command)."""
        head = self.problems[0]
        more = len(self.problems) - 1
        where = f": {self.listed_by} lists them" if self.listed_by else ""
        line = f"{head} (and {more} more problem{'s' if more > 1 else ''}{where})" if more else head
        return f"{self.source}: {line}" if self.source else line


class RunInputError(PlanError):
    """A run's inputs do not fit its plan's ``inputs:`` schema (a missing required input,
    a value of the wrong type, one the plan does not declare), or a ``{{ inputs.… }}``
    of the plan names a value the run lacks. ``problems``: one line each."""


class UnknownRunError(InputError):
    """No run has this id (a typo, another Redis, or its retention expired)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"no run {shown_id(run_id)!r} here: check the id, or DAGWRIGHT_REDIS_URL if it ran "
            "elsewhere (finished runs are kept for DAGWRIGHT_RETENTION_S)"
        )


class UnknownNodeError(InputError):
    """The run has no node with this id."""

    def __init__(self, run_id: str, node_id: str) -> None:
        self.run_id = run_id
        self.node_id = node_id
        super().__init__(
            f"run {shown_id(run_id)} has no node {node_id!r}: `dagwright status` lists its nodes"
        )


def error_line(exc: BaseException) -> str:
    """The one line a person reads for ``exc``: the CLI's error line on stderr, and the
    ``detail`` of the HTTP API's problem responses (so both say the same thing)."""
    return str(exc) or type(exc).__name__


class ConflictError(InputError):
    """The thing named exists, and its state forbids the action: a letter replayed
    already, a node that waits for no decision (HTTP's 409, where an unknown thing is a
    404 and malformed input a 422)."""


class DeadLetterError(InputError):
    """No dead letter has this id, or it cannot be replayed (the reason is said)."""


class NotReplayableError(DeadLetterError, ConflictError):
    """The dead letter cannot be replayed now: replayed already, superseded, or its run
    cancelled or expired (the reason is said)."""


class UnknownDeadLetterError(DeadLetterError):
    """No dead letter has this id (purged, expired, or a typo)."""


class EgressRefusedError(InputError):
    """A URL points where this deployment sends nothing: a loopback, private, link-local,
    unique-local, multicast, reserved or cloud-metadata address (or a name resolving to
    one) that ``DAGWRIGHT_EGRESS_ALLOW`` does not list (``dagwright/egress/``)."""


class ConfigurationError(InputError):
    """Settings are missing, malformed or contradictory."""


# The optional dependencies that each serve one feature, by the module a feature imports:
# the extra of pyproject.toml that installs it.
EXTRA_OF_MODULE = {
    "docker": "docker",
    "flower": "flower",
    "PIL": "charts",
    "mcp": "mcp",
    "opentelemetry": "opentelemetry",
}


class RetiredModelError(ConfigurationError):
    """A configured model is past its end of life: the API refuses every call to it. The
    message names the replacement (dagwright.llm.model_lifecycle)."""


class MalformedSkillError(ConfigurationError):
    """A skill folder is not what the Agent Skills specification allows (its SKILL.md's
    front matter, its name, a link out of it, its size): one line naming the folder and
    what to fix. Refused when a worker starts, and by ``dagwright doctor``."""


class ModelEndOfLifeWarning(UserWarning):
    """A configured model retires within 30 days: it works today, and fails every call
    from its end-of-life day on. The message names the replacement."""


class MissingExtraError(ConfigurationError):
    """A feature needs an optional dependency that is not installed: says which extra
    installs it."""

    @classmethod
    def of(cls, exc: ImportError, feature: str) -> MissingExtraError:
        """The error for ``exc``, raised importing what ``feature`` needs; ``exc`` itself
        (re-raised by the caller) when the missing module is not an optional one."""
        module = (exc.name or "").split(".")[0]
        extra = EXTRA_OF_MODULE.get(module) or EXTRA_OF_MODULE.get(module.split("_")[0])
        if extra is None:
            raise exc
        return cls(
            f"{feature} needs the {module!r} package, which is not installed: "
            f"pip install 'dagwright[{extra}]'"
        )


class UnpricedModelError(InputError):
    """A run with a USD budget would call a model missing from ``model_prices``: its cost
    could not be counted against the budget, so the run is refused at submit."""


class UnrunnablePlanError(InputError):
    """Workers are live, and none of them can run some node of the plan: a worker type,
    a function or an LLM endpoint is missing from every one (refused at submit, not
    dead-lettered node by node).

    Attributes:
        problems: what is missing, each a sentence that says where to set it.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class IdempotencyConflictError(InputError):
    """An idempotency key reused with another plan or goal (HTTP's 409): the key names the
    run the first submit started, which this submit would not be a retry of.

    Attributes:
        run_id: the run the key names.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"this idempotency key was used for run {shown_id(run_id)} with another plan or "
            "goal: use a new key for a different request"
        )


class RunOptionError(InputError, TypeError):
    """A keyword of ``submit`` that ``RunOptions`` does not name (``timeout=`` for
    ``timeout_s=``, Celery's ``eta=``), or a scalar option of the wrong type: refused
    before anything is written. A TypeError too, as Python's own unknown keyword is."""


class BrokerUnavailableError(DagwrightError):
    """Redis/Valkey (state store or broker) cannot be reached."""


class RunError(DagwrightError):
    """A run did not produce a result."""

    def __init__(self, message: str, *, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(message)


class RunFailedError(RunError):
    """At least one node failed for good, so the run has no result."""


class RunCancelledError(RunError):
    """The run was cancelled before it finished."""


class RunNotFinishedError(RunError, TimeoutError):
    """The run was still going when the wait timed out (it keeps running)."""


class ToolError(DagwrightError):
    """A tool could not do what the model asked (bad path, domain not allowed, timeout):
    the agent loop reports it to the model as a failed tool call."""


class ToolTimeoutError(ToolError):
    """The tool did not finish in time: unlike a refusal, it counts against the tool's
    circuit breaker."""


class NodeError(DagwrightError):
    """Raised by worker code to say how a failure must be handled."""


class RetryableError(NodeError):
    """A transient failure: the node is retried with backoff up to its RetryPolicy."""


class PermanentError(NodeError):
    """Retrying cannot help (bad input, bad output, policy): the node fails at once."""


class LLMUnavailableError(RetryableError):
    """The LLM API kept failing (429/5xx/529, timeouts) through the LLM layer's retries."""


class BreakerOpenError(RetryableError):
    """A dependency's circuit breaker is open: calls fail fast until ``retry_after_s``.

    The node is not failed: it waits (RETRY_WAIT) that long, and the wait does not count
    as an attempt. ``last_failure`` is the failure that last counted against the breaker
    (``"<class>: <message>"``), so that a waiting node can say why it waits.
    """

    def __init__(self, breaker: str, retry_after_s: float, last_failure: str = "") -> None:
        self.breaker = breaker
        self.retry_after_s = max(retry_after_s, 0.0)
        self.last_failure = last_failure
        cause = f": last failure {last_failure}" if last_failure else ""
        super().__init__(
            f"the circuit breaker {breaker!r} is open for {self.retry_after_s:.1f}s more{cause}"
        )


class BreakerWaitExpiredError(PermanentError):
    """A node waited ``breaker_max_wait_s`` on an open breaker, through one open period
    after another: it is dead-lettered rather than left waiting for ever. Replay it
    (``dagwright dlq replay``) once the dependency is back."""


class LLMEndpointUnreachableError(PermanentError):
    """Nothing answers at the configured LLM endpoint (connection refused, no such host)
    through the LLM layer's few quick retries. A misconfigured ``ANTHROPIC_BASE_URL`` is
    far likelier than a blip that outlasts them, so the node fails at once with the
    endpoint named, instead of waiting on a breaker; replay it once the endpoint is up."""


class LLMRateLimitedError(RetryableError):
    """The model's rate limit (``llm_rate_limits``) left no room for the call within
    ``llm_rate_max_wait_s``: the node is retried later, no sooner than ``retry_after_s``."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        self.retry_after_s = max(retry_after_s, 0.0)
        super().__init__(message)


class LLMBatchPendingError(RetryableError):
    """The node's LLM call was sent in a Message Batch (the run, schedule or agent type
    asked for half-price calls) that has not answered yet. The node is not failed: it
    is parked (RETRY_WAIT) until ``retry_after_s``, when it polls the batch again, and
    the wait does not count as an attempt; it is bounded by ``llm_batch_max_wait_s``."""

    def __init__(self, batch_id: str, retry_after_s: float, submitted_at: float) -> None:
        self.batch_id = batch_id
        self.retry_after_s = max(retry_after_s, 0.0)
        self.submitted_at = submitted_at
        super().__init__(
            f"waiting on Message Batch {batch_id}; polled again in {self.retry_after_s:.0f}s"
        )


class TeamTaskPendingError(RetryableError):
    """A ``celery_task`` node's task was sent to the team's own Celery workers and has no
    result yet. The node is not failed: it is parked (RETRY_WAIT), holding no worker
    slot, until its result is in (the reconciler looks every pass) or ``retry_after_s``
    at the latest; the wait does not count as an attempt and is bounded by the node's
    ``timeout_s``."""

    def __init__(self, task_id: str, retry_after_s: float) -> None:
        self.task_id = task_id
        self.retry_after_s = max(retry_after_s, 0.0)
        super().__init__(f"waiting for Celery task {task_id} on the team's workers")


class TeamTaskFailedError(RetryableError):
    """The team's Celery task failed (after its own retries) or was revoked by someone
    else. Recorded under the team's exception class name (``error_class``), so a plan's
    ``retry.non_retryable`` can name it; retried per the node's RetryPolicy (the
    ``celery_task`` type's default: no dagwright retry, the task has its own)."""

    def __init__(self, error_class: str, message: str) -> None:
        self.error_class = error_class
        super().__init__(message)


class TeamAppError(PermanentError):
    """The team's Celery app cannot carry ``celery_task`` nodes: none is configured
    (``DAGWRIGHT_CELERY_APP``), it cannot be imported, it has no result backend, or it
    is not JSON-only (pickle is code execution for anyone who can write to its broker)."""


class BatchWaitExpiredError(PermanentError):
    """A node's Message Batch did not answer within ``llm_batch_max_wait_s``: the batch is
    cancelled and the node dead-lettered rather than left waiting. A replay sends the
    call again (in a new batch, or not, as the run then asks)."""


class LLMCallTooLargeError(PermanentError):
    """One call's tokens (input estimate plus ``max_tokens``) exceed the model's whole
    tokens-per-minute limit: it could never be made."""


class NodeTimeoutError(RetryableError):
    """The node ran past its execution time limit (``timeout_s``, else
    ``settings.limits.default_timeout_s``). Retried per its RetryPolicy (a slow dependency may
    answer faster next time); list it in ``non_retryable`` to fail at once."""


class LLMNotConfiguredError(PermanentError):
    """No API key and no base URL: failing fast beats retrying a call that cannot work."""


class LLMRequestError(PermanentError):
    """The API refused the request itself (bad request, bad key, no such model)."""


class LLMResponseError(PermanentError):
    """The API answered something that is not a valid Messages API response."""


class AgentMaxTurnsError(PermanentError):
    """The agent reached its worker type's max_turns without a final answer."""


class AgentToolErrorsError(PermanentError):
    """The agent's tool calls failed too many times in a row."""


class ToolPolicyError(AgentToolErrorsError):
    """The agent gave up on tool calls the tool policy refused: a policy matter, which a
    change of policy (not a retry) fixes."""


class AgentOutputError(PermanentError):
    """The agent's answer is unusable: cut at max_tokens even at ``llm_max_tokens_cap``, a
    refusal with no fallback model left, no answer even after a nudge, or the model's
    context window full. (An answer that does not match its schema goes back to the model
    as a failed tool call.)"""


class PlanningFailedError(PermanentError):
    """The planner gave no valid plan within its repairs (the last problems are said)."""


class PoisonMessageError(PermanentError):
    """The process running the node died again and again without recording an outcome, as
    its worker's surviving parent saw: the node kills the process that runs it (a crash,
    an OOM kill, a hard time limit). It goes to the DLQ, not round again."""


class WorkersLostError(PermanentError):
    """The node lost its whole worker (a host, an eviction, a SIGKILL of the group: its
    lease expired) ``max_worker_losses`` times without recording an outcome. No fault of
    the node's was seen, but it is not delivered again for ever."""


class BudgetExceededError(PermanentError):
    """The next LLM call could take the node past its token budget (its input plus
    max_tokens of output): it is not made."""


class NodeLostError(NodeError):
    """This worker no longer owns the node (its lease was taken over, or the run was
    cancelled): the work stops and nothing more is recorded for it."""


class CodeExecutionError(PermanentError):
    """Sandboxed code did not succeed: it exited non-zero, or hit its time or memory limit.
    The same code would fail the same way: not retried."""


class SandboxUnavailableError(PermanentError):
    """No sandbox backend can run code here (or the chosen one failed its self-test).
    Code is refused rather than run unsandboxed; fix the host, then replay."""


class RateLimitWaitExpiredError(RetryableError):
    """A node waited ``rate_limit_max_wait_s`` in all for its rate limits (``rate_limit=``
    of its function, ``DAGWRIGHT_RATE_LIMITS``) without its turn: the attempt fails and
    its retry policy decides, rather than the node waiting for ever behind a backlog."""


class SandboxFailedError(RetryableError):
    """The sandbox backend itself failed while running code (its daemon went away, a
    container could not be created): not the code's fault, so retried."""


class McpServerUnavailableError(RetryableError):
    """An MCP server attached to the agent type did not start (or list its tools) in
    time: the node is retried later; ``dagwright doctor`` says what the server answers."""


class ScheduleError(InputError):
    """A schedule is invalid (its cron expression, timezone, policies), or there is no
    schedule by that name."""


class ApprovalError(InputError):
    """No approval is waiting for that node (never asked, decided already, or its run
    ended), or the decision given is malformed."""


class NotWaitingError(ApprovalError, ConflictError):
    """The node exists and waits for no decision: never asked, decided already, or its
    run ended."""


class ApprovalRejectedError(PermanentError):
    """The node needed a person's approval, and it was rejected (or nobody decided in
    time): a policy matter, so not retried."""


class SkillChangedError(PermanentError):
    """A node resumed from its checkpoint uses a skill whose content is no longer the
    version the node started with (its hash, recorded in the checkpoint): the node's
    conversation was built on the old version, so it is not continued with another.
    Replaying it fresh (``dagwright dlq replay ID --fresh``) runs it with the new one."""


class ScoreError(InputError):
    """A score given to a run is malformed: its name, value (a finite number or a boolean),
    comment, source or author; the message names the field."""


class ScoreLimitError(ScoreError):
    """The run holds as many scores as a run may (``run_scores_max``): a bound, so that
    feedback cannot grow a run's keys without end."""


class UnknownMemoryError(InputError):
    """No memory namespace by this name (never written, removed, or past its retention)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        super().__init__(
            f"no memory namespace {namespace!r}: `dagwright memory ls` lists them "
            "(a namespace is kept for DAGWRIGHT_MEMORY_RETENTION_S after its last write)"
        )


class UnknownEvalError(InputError):
    """No eval has this id (a typo, another Redis, or its retention expired)."""

    def __init__(self, eval_id: str) -> None:
        self.eval_id = eval_id
        super().__init__(
            f"no eval {shown_id(eval_id)!r} (`dagwright evals list` lists them; "
            "evals are kept for DAGWRIGHT_EVAL_RETENTION_S)"
        )


class UnknownScheduleError(ScheduleError):
    """There is no schedule by that name."""


# -- what a remote caller (the HTTP API, an MCP client) is told of an error ------------

INTERNAL_ERROR = "internal error: see the server's log"

STATUS_OF_ERROR: tuple[tuple[type[DagwrightError] | tuple[type[DagwrightError], ...], int], ...] = (
    (
        (
            UnknownRunError,
            UnknownNodeError,
            UnknownDeadLetterError,
            UnknownScheduleError,
            UnknownEvalError,
            UnknownMemoryError,
        ),
        404,
    ),
    ((IdempotencyConflictError, ConflictError), 409),
    (RunError, 409),
    (ConfigurationError, 500),
    (InputError, 422),
    (BrokerUnavailableError, 503),
)


def status_of(exc: DagwrightError) -> int:
    for classes, status in STATUS_OF_ERROR:
        if isinstance(exc, classes):
            return status
    return 500


def public_line(exc: DagwrightError, status: int | None = None) -> str:
    """What a caller is told of ``exc``: its CLI line when the caller can act on it (a
    4xx), else a line that names no internal address (the line of a 5xx, which says
    where Redis is, goes to the server's log only)."""
    status = status or status_of(exc)
    if status < 500:
        return error_line(exc)
    if isinstance(exc, BrokerUnavailableError):
        return "the server cannot reach its Redis store right now: retry later (its log says more)"
    if isinstance(exc, ConfigurationError):
        return "the server's configuration is wrong: see the server's log"
    return INTERNAL_ERROR

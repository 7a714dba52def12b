"""Every exception dagwright raises, in one tree split by who must react.

::

    DagwrightError
    ├── InputError                 the caller must fix something (CLI exit code 2)
    │   ├── PlanError              a plan file or plan object is malformed or invalid
    │   ├── UnknownRunError        no run with that id (or it expired)
    │   └── ConfigurationError     settings are missing or contradictory
    ├── BrokerUnavailableError     Redis/Valkey or the broker cannot be reached
    ├── RunError                   a run did not produce a result
    │   ├── RunFailedError         at least one node failed for good
    │   ├── RunCancelledError      the run was cancelled
    │   └── RunNotFinishedError    waited up to the timeout; the run is still going
    ├── ToolError                  a tool call failed: reported to the model, not raised on
    └── NodeError                  raised by worker code; decides what happens to a node
        ├── RetryableError         transient: retried with backoff (RetryPolicy)
        │   └── LLMUnavailableError        the LLM API failed after its own retries
        ├── PermanentError         retrying cannot help: the node fails at once
        │   ├── LLMNotConfiguredError      no API key / base URL: fails before any call
        │   ├── LLMRequestError            the API refused the request (4xx) or the key
        │   ├── LLMResponseError           the API answered something unusable
        │   ├── AgentMaxTurnsError         the agent used its turns without a final answer
        │   ├── AgentToolErrorsError       too many tool calls failed in a row
        │   ├── AgentOutputError           the final answer was cut off, or refused
        │   ├── PlanningFailedError        the planner gave no valid plan within its repairs
        │   └── BudgetExceededError        the next LLM call could pass the token budget
        └── NodeLostError          the node was taken from this worker (re-queued or
                                   cancelled): stop quietly, nothing is recorded

Worker code may raise any exception. Anything that is not a ``NodeError`` counts as
retryable, as in Temporal: a flaky dependency is likelier than a deterministic bug, and a
bug still fails after ``max_attempts``. Foreign exceptions (redis, celery, pydantic) are
translated where they enter dagwright, so callers only ever catch these classes.
"""

from __future__ import annotations


class DagwrightError(Exception):
    """Root of every error dagwright raises on purpose."""


class InputError(DagwrightError):
    """Bad input from the caller: a message a person can act on."""


class PlanError(InputError):
    """A plan is malformed or fails validation.

    Attributes:
        problems: every problem found, each a sentence that says what to fix.
    """

    def __init__(self, problems: list[str], *, source: str | None = None) -> None:
        self.problems = list(problems) or ["the plan is invalid"]
        self.source = source
        super().__init__(self.summary())

    def summary(self) -> str:
        """One line: the first problem, and how many more there are."""
        head = self.problems[0]
        more = len(self.problems) - 1
        line = f"{head} (and {more} more problem{'s' if more > 1 else ''})" if more else head
        return f"{self.source}: {line}" if self.source else line


class UnknownRunError(InputError):
    """No run has this id (a typo, another Redis, or its retention expired)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"no run {run_id!r} here: check the id, or DAGWRIGHT_REDIS_URL if it ran elsewhere "
            "(finished runs are kept for DAGWRIGHT_RETENTION_S)"
        )


class ConfigurationError(InputError):
    """Settings are missing, malformed or contradictory."""


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


class NodeError(DagwrightError):
    """Raised by worker code to say how a failure must be handled."""


class RetryableError(NodeError):
    """A transient failure: the node is retried with backoff up to its RetryPolicy."""


class PermanentError(NodeError):
    """Retrying cannot help (bad input, bad output, policy): the node fails at once."""


class LLMUnavailableError(RetryableError):
    """The LLM API kept failing (429/5xx/529, timeouts) through the LLM layer's retries."""


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


class AgentOutputError(PermanentError):
    """The agent's final answer is unusable: cut at max_tokens, or a refusal. (An answer
    that does not match its schema goes back to the model as a failed tool call.)"""


class PlanningFailedError(PermanentError):
    """The planner gave no valid plan within its repairs (the last problems are said)."""


class BudgetExceededError(PermanentError):
    """The next LLM call could take the node past its token budget (its input plus
    max_tokens of output): it is not made."""


class NodeLostError(NodeError):
    """This worker no longer owns the node (its lease was taken over, or the run was
    cancelled): the work stops and nothing more is recorded for it."""

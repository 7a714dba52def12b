"""Circuit breakers per dependency (a model, a tool), state shared by every worker in Redis.

pybreaker does the state machine (closed → open after ``fail_max`` failures in a row →
half-open after ``reset_timeout`` → closed on a successful probe), with
``CircuitRedisStorage`` so that all processes and hosts share one state per breaker.
Around it:

- One pybreaker instance per thread and breaker: ``CircuitBreaker.call`` holds a lock for
  the whole call, so a shared instance would run one LLM call at a time per process.
- An open breaker fails fast with ``BreakerOpenError`` carrying the remaining open time,
  read from the shared state, so the node waits exactly that long (RETRY_WAIT).
- pybreaker lets every caller through once the open time is over; here a Redis counter
  lets through at most ``max_probes`` callers at once, over every worker, and the others
  wait as if the breaker were still open.
- Only failures ``is_failure`` accepts count (an unreachable API, a stalled stream): a
  refused request or a tool's "no such file" is the caller's business, not the dependency's.
  The last failure that counted is kept beside the breaker, and an open breaker's refusal
  carries it, so a node waiting on the breaker can say why: redacted, since it is a
  foreign exception's message (a tool's may quote an API key) and is shown to people.
- What a call did to its breaker (refused, opened it, closed it) is told to the observer
  of the calling thread (``observed``), for the trace of the node that made the call. The
  state is shared, so "this call opened it" is not read from the state before and after
  (another worker may have changed it meanwhile) but from pybreaker's listener: the state
  changes this thread's breaker made once it had let the call through.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import pybreaker
import redis

from dagwright.errors import BreakerOpenError
from dagwright.keys import Keys
from dagwright.redaction import redact
from dagwright.redis_scripts import is_cluster_client, load_script, named_reply

T = TypeVar("T")

PROBE_WAIT_S = 2.0  # how long a caller refused a probe slot waits before asking again
LAST_FAILURE_MAX_CHARS = 300  # one line in `status`, not a response body


@dataclass(frozen=True)
class BreakerStatus:
    name: str
    state: str  # closed, open, half-open
    failures: int
    open_for_s: float  # remaining open time (0 unless open)


@dataclass(frozen=True)
class BreakerEvent:
    """What one call did to its breaker."""

    breaker: str
    kind: Literal["refused", "opened", "closed"]
    open_for_s: float  # how long the breaker stays open (0 once closed)


class CallTransitions(pybreaker.CircuitBreakerListener):
    """The states a breaker entered after letting the current call through: the changes
    the call itself caused. pybreaker also announces changes it merely noticed (made by
    another process), but only before the call, while this is not armed."""

    def __init__(self) -> None:
        self.armed = False
        self.entered: list[str] = []
        self.counted_failure: BaseException | None = None

    def start(self) -> None:
        self.armed, self.entered, self.counted_failure = False, [], None

    def failure(self, cb: Any, exc: BaseException) -> None:
        self.counted_failure = exc

    def before_call(self, cb: Any, func: Any, *args: Any, **kwargs: Any) -> None:
        self.armed = True

    def state_change(self, cb: Any, old_state: Any, new_state: Any) -> None:
        if self.armed:
            self.entered.append(new_state.name)

    def caused(self) -> list[Literal["opened", "closed"]]:
        kinds: dict[str, Literal["opened", "closed"]] = {
            pybreaker.STATE_OPEN: "opened",
            pybreaker.STATE_CLOSED: "closed",
        }
        return [kinds[state] for state in self.entered if state in kinds]


class Breakers:
    """The circuit breakers of one process."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        fail_max: int,
        reset_timeout_s: float,
        max_probes: int,
        secrets: Sequence[str] = (),
    ) -> None:
        """``secrets``: the process's own (``known_secrets``), masked in failures kept."""
        if client.get_encoder().decode_responses:
            raise ValueError("pybreaker's Redis storage needs a client without decode_responses")
        self.client = client
        self.keys = keys
        self.fail_max = fail_max
        self.reset_timeout_s = reset_timeout_s
        self.max_probes = max_probes
        self.secrets = tuple(secrets)
        self._local = threading.local()
        self._take_probe = load_script(client, "dagwright.resilience", "breaker_take_probe")

    def call(
        self,
        name: str,
        func: Callable[..., T],
        *args: Any,
        is_failure: Callable[[BaseException], bool],
        describe_failure: Callable[[BaseException], str] | None = None,
        **kwargs: Any,
    ) -> T:
        """``func(*args, **kwargs)`` through the breaker ``name``; BreakerOpenError if it
        is open (or half-open with its probes taken). ``describe_failure`` words a failure
        that counted for the nodes waiting on the breaker (default ``"<class>: <message>"``)."""
        breaker, transitions = self._breaker(name, is_failure)
        state = breaker.current_state
        if state == pybreaker.STATE_OPEN:
            remaining = self._open_for_s(breaker)
            if remaining > 0:
                raise self._refused(name, remaining)
        probing = state != pybreaker.STATE_CLOSED
        if probing and not self._take_probe_slot(name):
            raise self._refused(name, PROBE_WAIT_S)
        transitions.start()
        try:
            return breaker.call(func, *args, **kwargs)
        except pybreaker.CircuitBreakerError as exc:  # this call opened it, or it opened meanwhile
            remaining = self._open_for_s(breaker) or self.reset_timeout_s
            if "opened" not in transitions.caused():
                raise self._refused(name, remaining) from exc
            last = transitions.counted_failure
            described = self._described(last, describe_failure) if last is not None else ""
            raise BreakerOpenError(name, remaining, described) from exc
        finally:
            if probing:
                self.client.decr(self.keys.breaker_probes(name))
            if transitions.counted_failure is not None:
                self._remember_failure(name, transitions.counted_failure, describe_failure)
            for kind in transitions.caused():
                open_for_s = self.reset_timeout_s if kind == "opened" else 0.0
                self._tell(BreakerEvent(name, kind, open_for_s))

    @contextmanager
    def observed(self, on_event: Callable[[BreakerEvent], None]) -> Iterator[None]:
        """Tell ``on_event`` what the calls this thread makes meanwhile do to their breakers."""
        previous = getattr(self._local, "observer", None)
        self._local.observer = on_event
        try:
            yield
        finally:
            self._local.observer = previous

    def status(self, name: str) -> BreakerStatus:
        storage = self._storage(name)
        state = storage.state
        remaining = self._remaining(storage.opened_at) if state == pybreaker.STATE_OPEN else 0.0
        return BreakerStatus(name=name, state=state, failures=storage.counter, open_for_s=remaining)

    def statuses(self) -> list[BreakerStatus]:
        """Every known breaker's status in two round trips, writing nothing (pybreaker's
        storage initialises a breaker's keys when it reads them)."""
        names = self.names()
        fields = ("state", "fail_counter", "opened_at")
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            for field in fields:
                pipe.get(self._storage_key(name, field))
        values = pipe.execute()
        statuses = []
        for i, name in enumerate(names):
            state, failures, opened_at = values[i * len(fields) : (i + 1) * len(fields)]
            state = state.decode() if state else pybreaker.STATE_CLOSED
            remaining = 0.0
            if state == pybreaker.STATE_OPEN and opened_at:
                remaining = self._remaining(datetime.fromtimestamp(int(opened_at), UTC))
            statuses.append(BreakerStatus(name, state, int(failures or 0), remaining))
        return statuses

    def _storage_key(self, name: str, field: str) -> str:
        # As CircuitRedisStorage._namespace names them.
        base = pybreaker.CircuitRedisStorage.BASE_NAMESPACE
        return f"{self.keys.breaker_namespace(name)}:{base}:{field}"

    def names(self) -> list[str]:
        return sorted(name.decode() for name in self.client.smembers(self.keys.breakers))

    def _breaker(
        self, name: str, is_failure: Callable[[BaseException], bool]
    ) -> tuple[pybreaker.CircuitBreaker, CallTransitions]:
        breakers: dict[str, tuple[pybreaker.CircuitBreaker, CallTransitions]] = (
            self._local.__dict__.setdefault("by_name", {})
        )
        if name not in breakers:
            self.client.sadd(self.keys.breakers, name)
            transitions = CallTransitions()
            breaker = pybreaker.CircuitBreaker(
                fail_max=self.fail_max,
                reset_timeout=self.reset_timeout_s,
                exclude=[lambda exc: not is_failure(exc)],
                state_storage=self._storage(name),
                listeners=[transitions],
                name=name,
            )
            breakers[name] = (breaker, transitions)
        return breakers[name]

    def _refused(self, name: str, open_for_s: float) -> BreakerOpenError:
        self._tell(BreakerEvent(name, "refused", open_for_s))
        return BreakerOpenError(name, open_for_s, self.last_failure(name))

    def last_failure(self, name: str) -> str:
        """The last failure counted against ``name`` (``""`` if none is remembered)."""
        raw = self.client.get(self.keys.breaker_last_failure(name))
        return raw.decode(errors="replace") if raw else ""

    def _remember_failure(
        self, name: str, exc: BaseException, describe: Callable[[BaseException], str] | None
    ) -> None:
        # Kept a little longer than one open period: long enough for the nodes it holds back.
        line = self._described(exc, describe)
        ttl_s = max(int(self.reset_timeout_s * 4), 60)
        self.client.set(self.keys.breaker_last_failure(name), line, ex=ttl_s)

    def _described(
        self, exc: BaseException, describe: Callable[[BaseException], str] | None
    ) -> str:
        return redact(described_failure(exc, describe), self.secrets)

    def _tell(self, event: BreakerEvent) -> None:
        observer = getattr(self._local, "observer", None)
        if observer is not None:
            observer(event)

    def _storage(self, name: str) -> pybreaker.CircuitRedisStorage:
        return pybreaker.CircuitRedisStorage(
            pybreaker.STATE_CLOSED,
            self.client,
            namespace=self.keys.breaker_namespace(name),
            cluster_mode=is_cluster_client(self.client),  # no WATCH/MULTI on a cluster
        )

    def _open_for_s(self, breaker: pybreaker.CircuitBreaker) -> float:
        return self._remaining(breaker._state_storage.opened_at)

    def _remaining(self, opened_at: datetime | None) -> float:
        if opened_at is None:
            return 0.0
        elapsed = (datetime.now(UTC) - opened_at).total_seconds()
        return max(self.reset_timeout_s - elapsed, 0.0)

    def _take_probe_slot(self, name: str) -> bool:
        ttl_ms = int(self.reset_timeout_s * 1000)
        reply = self._take_probe(
            keys=[self.keys.breaker_probes(name)], args=[self.max_probes, ttl_ms]
        )
        return bool(int(named_reply(reply)["taken"]))


def described_failure(exc: BaseException, describe: Callable[[BaseException], str] | None) -> str:
    """One line of at most ``LAST_FAILURE_MAX_CHARS`` saying what failed."""
    text = describe(exc) if describe is not None else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:LAST_FAILURE_MAX_CHARS]


def call_directly(
    name: str,
    func: Callable[..., T],
    *args: Any,
    is_failure: Callable[[BaseException], bool],
    describe_failure: Callable[[BaseException], str] | None = None,
    **kwargs: Any,
) -> T:
    """The same signature as ``Breakers.call``, without a breaker (tests, local planning)."""
    return func(*args, **kwargs)

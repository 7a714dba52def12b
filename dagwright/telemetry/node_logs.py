"""Node logs: what a node attempt prints and logs, kept per attempt, bounded and redacted.

While a worker runs a node attempt, ``capturing`` sets a context variable to that
attempt's ``AttemptLog``. Three doors lead into it:

- ``sys.stdout`` and ``sys.stderr`` are wrapped once per process (``NodeStream``): a write
  made in the attempt's context is kept (and still passed on to the worker's own stream);
- a handler on the root logger (``NodeLogHandler``) keeps the ``logging`` records made in
  that context: a user's function's, and dagwright's own about the attempt (an agent's
  LLM calls and tool calls, a retry, a wait on a breaker or a rate limit);
- ``write_node_output`` for output the worker collected itself (a sandboxed program's
  stderr).

A context variable, not a thread-local or the process: the threads pool runs nodes side
by side, each thread its own context, and an ``async`` function's tasks inherit it; a
thread the node starts itself does not (its lines go to the worker's log only). Nothing
outside an attempt is kept: the worker's own chatter, another node's lines.

Every line is redacted (``redaction.redact``, this deployment's secrets included) and cut
at ``node_log_max_line_chars``; an attempt keeps at most ``node_log_max_bytes``, then
counts what it drops and ends with a ``… truncated N bytes`` line. Lines are buffered and
written in small batches, one round trip each: ``FLUSH_LINES`` lines, lines that waited
``FLUSH_INTERVAL_S`` (a thread per process looks every half of it), and the rest before
the attempt's outcome is recorded. A node that logs nothing costs no round trip, and a
worker that dies mid-node loses at most the unflushed tail (its last second or so).

The worker's own log lines name the attempt they were made in: ``tag_log_handlers`` puts
``[run=… node=…]`` before the message of every record made in an attempt's context.

Rejected: redirecting file descriptors 1 and 2 (what a subprocess writes would be kept too,
but a process-wide redirect cannot tell the threads pool's concurrent nodes apart), and a
key per node (a run's logs would be as many keys as nodes, none expired in one step).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TextIO

from dagwright.redaction import redact
from dagwright.shown_ids import shown_id

log = logging.getLogger(__name__)

FLUSH_LINES = 50  # a batch of lines written in one round trip while the node runs
FLUSH_INTERVAL_S = 1.0  # or older than this, when the next line arrives
CAPTURE_LEVEL = logging.INFO  # the records kept, whatever the worker's own log level
LINE_CUT_MARK = "…"
# Records not kept as node logs: what printing already kept (Celery's redirected stdout),
# and this module's own (a failed write must not feed itself).
IGNORED_LOGGERS = frozenset({"celery.redirected", __name__})

Sink = Callable[[list[str]], object]
"""Writes a batch of lines (each line's JSON) to the run's log stream."""


@dataclass(frozen=True)
class LogLimits:
    """The bounds of one attempt's logs (from the settings)."""

    max_bytes: int
    max_line_chars: int
    secrets: tuple[str, ...] = ()


@dataclass(eq=False)  # identity: the flusher keeps the live ones in a set
class AttemptLog:
    """The log of one node attempt: lines kept in order, bounded, redacted, flushed in
    small batches to ``sink``. Safe to write from several threads."""

    run_id: str
    node_id: str
    attempt: int
    limits: LogLimits
    sink: Sink
    kept_bytes: int = 0
    dropped_bytes: int = 0
    _buffer: list[str] = field(default_factory=list)
    _partial: dict[str, str] = field(default_factory=dict)
    _flushed_at: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sending: threading.Lock = field(default_factory=threading.Lock)

    def write(self, source: str, text: str) -> None:
        """Printed text (``stdout``/``stderr``): kept line by line, a partial line held
        until its end arrives or the attempt ends."""
        with self._lock:
            pending = self._partial.pop(source, "") + text
            *lines, rest = pending.split("\n")
            if rest:
                self._partial[source] = rest
            for line in lines:
                self._keep(source, line.rstrip("\r"), None, None)
        self._flush_if_due()

    def record(self, text: str, *, level: str, logger: str) -> None:
        """One ``logging`` record (its message, and its traceback if any)."""
        with self._lock:
            self._keep("log", text, level, logger)
        self._flush_if_due()

    def settle(self) -> None:
        """Write everything so far: the partial lines, the truncation note, the buffer."""
        with self._lock:
            for source, rest in sorted(self._partial.items()):
                self._keep(source, rest, None, None)
            self._partial.clear()
            if self.dropped_bytes:
                note = f"{LINE_CUT_MARK} truncated {self.dropped_bytes} bytes"
                self._buffer.append(self._line_json("log", note, "WARNING", "dagwright"))
                self.dropped_bytes = 0
        self.flush()

    def close(self) -> None:
        """End of the attempt: what came after the last ``settle``."""
        self.settle()

    def flush(self) -> None:
        """Write the buffered lines (one round trip); a failure loses them, not the node.
        One flush at a time, so batches land in the order their lines came."""
        with self._sending:
            with self._lock:
                batch, self._buffer = self._buffer, []
                self._flushed_at = time.monotonic()
            if not batch:
                return
            try:
                self.sink(batch)
            except Exception as exc:  # logs are not worth a node: Redis may be failing over
                log.warning("%d log lines of %s lost (%s)", len(batch), self._shown(), exc)

    def flush_if_stale(self) -> None:
        """Flush lines that have waited ``FLUSH_INTERVAL_S`` (the flusher thread's call)."""
        if self._buffer and time.monotonic() - self._flushed_at >= FLUSH_INTERVAL_S:
            self.flush()

    def _flush_if_due(self) -> None:
        due = len(self._buffer) >= FLUSH_LINES
        if due or (self._buffer and time.monotonic() - self._flushed_at >= FLUSH_INTERVAL_S):
            self.flush()

    def _keep(self, source: str, text: str, level: str | None, logger: str | None) -> None:
        limits = self.limits
        if len(text) > limits.max_line_chars:
            text = text[: limits.max_line_chars] + LINE_CUT_MARK
        text = redact(text, limits.secrets)
        size = len(text.encode(errors="replace")) + 1
        if self.dropped_bytes or self.kept_bytes + size > limits.max_bytes:
            self.dropped_bytes += size
            return
        self.kept_bytes += size
        self._buffer.append(self._line_json(source, text, level, logger))

    def _line_json(self, source: str, text: str, level: str | None, logger: str | None) -> str:
        line: dict[str, Any] = {
            "node": self.node_id,
            "attempt": self.attempt,
            "at_ms": int(time.time() * 1000),
            "source": source,
            "text": text,
        }
        if level is not None:
            line["level"], line["logger"] = level, logger
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))

    def _shown(self) -> str:
        return f"{shown_id(self.run_id)}/{shown_id(self.node_id)}#{self.attempt}"


CURRENT: ContextVar[AttemptLog | None] = ContextVar("dagwright_node_log", default=None)


def current_attempt() -> AttemptLog | None:
    """The log of the node attempt running in this context, if any."""
    return CURRENT.get()


@contextlib.contextmanager
def capturing(attempt_log: AttemptLog | None) -> Iterator[AttemptLog | None]:
    """Keep what is printed and logged in this context as ``attempt_log``'s lines, and
    flush them when the block ends (whatever way). None: capture nothing, but still tag
    nothing; the block runs as is."""
    if attempt_log is None:
        yield None
        return
    install_capture()
    token = CURRENT.set(attempt_log)
    FLUSHER.watch(attempt_log)
    try:
        yield attempt_log
    finally:
        CURRENT.reset(token)
        FLUSHER.forget(attempt_log)
        attempt_log.close()


def flush_current() -> None:
    """Write the running attempt's lines now (partial ones too): before its outcome is
    recorded, so whoever sees the node end finds its lines in."""
    attempt_log = CURRENT.get()
    if attempt_log is not None:
        attempt_log.settle()


class Flusher:
    """One daemon thread per process that writes the lines of running attempts once they
    have waited ``FLUSH_INTERVAL_S``: a node that prints a line and then works for a
    minute shows that line within about a second (``dagwright logs -f``, the dashboard)."""

    def __init__(self) -> None:
        self._reset()
        # A fork (a prefork pool's child) has no thread and none of its parent's attempts;
        # a lock held by a parent's thread at the fork would stay held in the child.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._live: set[AttemptLog] = set()
        self._started = False

    def watch(self, attempt_log: AttemptLog) -> None:
        with self._lock:
            self._live.add(attempt_log)
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="dagwright-node-logs", daemon=True).start()

    def forget(self, attempt_log: AttemptLog) -> None:
        with self._lock:
            self._live.discard(attempt_log)

    def _run(self) -> None:
        while True:
            time.sleep(FLUSH_INTERVAL_S / 2)
            with self._lock:
                live = list(self._live)
            for attempt_log in live:
                attempt_log.flush_if_stale()


FLUSHER = Flusher()


def write_node_output(source: str, text: str) -> None:
    """Output a worker collected for the running attempt (a sandboxed program's stderr)."""
    attempt_log = CURRENT.get()
    if attempt_log is not None and text:
        attempt_log.write(source, text if text.endswith("\n") else text + "\n")


class NodeStream:
    """``sys.stdout`` or ``sys.stderr``, wrapped: what a node attempt writes is kept in its
    log as well. Everything else is the wrapped stream's."""

    def __init__(self, inner: TextIO, source: str) -> None:
        self.inner = inner
        self.source = source

    def write(self, text: str) -> int:
        attempt_log = CURRENT.get()
        if attempt_log is not None and isinstance(text, str):
            attempt_log.write(self.source, text)
        return self.inner.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class NodeLogHandler(logging.Handler):
    """On the root logger: keeps the records made in a node attempt's context."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        attempt_log = CURRENT.get()
        if attempt_log is None or record.name in IGNORED_LOGGERS:
            return
        try:
            text = self.format(record)
        except Exception:  # a record whose arguments do not fit its message
            text = str(record.msg)
        attempt_log.record(text, level=record.levelname, logger=record.name)


_HANDLER = NodeLogHandler()


def install_capture() -> None:
    """Wrap this process's stdout and stderr and put the handler on the root logger, if
    not done yet (again after Celery replaced them: its worker redirects the streams and
    takes over the root logger as it starts, and a pool's child does it again)."""
    if not isinstance(sys.stdout, NodeStream) and sys.stdout is not None:
        sys.stdout = NodeStream(sys.stdout, "stdout")
    if not isinstance(sys.stderr, NodeStream) and sys.stderr is not None:
        sys.stderr = NodeStream(sys.stderr, "stderr")
    root = logging.getLogger()
    if _HANDLER not in root.handlers:
        root.addHandler(_HANDLER)
    keep_records_from(CAPTURE_LEVEL)


def keep_records_from(level: int) -> None:
    """Let the root logger pass records of ``level`` and up, for the node logs, while its
    other handlers keep writing what they wrote: a worker at ``-l WARNING`` (the embedded
    stack's) still keeps a node's ``logging.info`` and an agent's steps in its logs, and
    its log file stays as quiet. A level is a logger's gate: a record below it is never
    made, whatever a handler wants."""
    root = logging.getLogger()
    if root.level == logging.NOTSET or root.level <= level:
        return
    for handler in root.handlers:
        if handler is not _HANDLER and handler.level < root.level:
            handler.setLevel(root.level)
    root.setLevel(level)


# -- the worker's own log lines, tagged with the attempt they were made in --------------


class NodeIdsFormatter(logging.Formatter):
    """A handler's formatter that puts ``[run=… node=…]`` (and ``#attempt`` past the
    first) before the message of a record made in a node attempt's context."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        attempt_log = CURRENT.get()
        if attempt_log is None:
            return self.inner.format(record)
        tagged = logging.makeLogRecord(record.__dict__)
        tagged.msg = f"{attempt_ids(attempt_log)} {record.getMessage()}"
        tagged.args = None
        return self.inner.format(tagged)


def attempt_ids(attempt_log: AttemptLog) -> str:
    """``[run=<run> node=<node>]``, ``[run=<run> node=<node>#2]`` for a second attempt."""
    again = f"#{attempt_log.attempt}" if attempt_log.attempt > 1 else ""
    return f"[run={shown_id(attempt_log.run_id)} node={shown_id(attempt_log.node_id)}{again}]"


def tag_log_handlers(logger: logging.Logger) -> None:
    """Make every handler of ``logger`` tag the records of node attempts (once each; a
    redacting formatter stays outermost, so the tag is redacted too)."""
    for handler in logger.handlers:
        if handler is _HANDLER:
            continue
        outer = handler.formatter or logging.Formatter()
        if tags_already(outer):
            continue
        inner = getattr(outer, "inner", None)
        if isinstance(inner, logging.Formatter):  # a RedactingFormatter: tag inside it
            outer.inner = NodeIdsFormatter(inner)  # type: ignore[attr-defined]
        else:
            handler.setFormatter(NodeIdsFormatter(outer))


def tags_already(formatter: logging.Formatter | None) -> bool:
    while formatter is not None:
        if isinstance(formatter, NodeIdsFormatter):
            return True
        formatter = getattr(formatter, "inner", None)
    return False


__all__ = [
    "AttemptLog",
    "LogLimits",
    "NodeIdsFormatter",
    "capturing",
    "current_attempt",
    "flush_current",
    "install_capture",
    "tag_log_handlers",
    "write_node_output",
]

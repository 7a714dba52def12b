"""A fake of the Anthropic Messages API on loopback, for tests and offline agent runs.

The real ``anthropic`` SDK is pointed at it with ``base_url``, so the code under test keeps
its real client: the SDK's own request building, response parsing, typed errors and retries
all run, and only the model is scripted. Faking at the HTTP level rather than patching the
SDK (or swapping its transport) also lets a script drive agents in other processes, such as
dagwright workers, through ``ANTHROPIC_BASE_URL``.

A script (see :mod:`dagwright.testing.fake_anthropic_script`), in YAML::

    entries:
      - match: {last_user_contains: weather}
        reply:
          content:
            - {type: text, text: Let me look that up.}
            - {type: tool_use, name: get_weather, input: {city: Paris}}
      - match: {tool_result_for: get_weather}
        reply:
          content: [{type: text, text: It is sunny in Paris.}]
          usage: {input_tokens: 120, output_tokens: 9}
      - status: 429
        headers: {retry-after: "1"}
      - match: {last_user_contains: essay}     # streamed slowly to a stream request
        reply:
          content:
            - {type: thinking, thinking: Plan it first.}
            - {type: text, text: A long essay.}
        stream: {event_delay_s: 0.5, chunk_chars: 8}
      - reply: {content: [{type: text, text: cut short}]}
        stream: {error_after_events: 3}          # an overloaded_error event mid-stream
      - malformed: schema
        times: -1
        match: {system_contains: "broken"}
      - match: {last_user_contains: license}   # a server-side web search, as the API plays it
        reply:
          content:
            - {type: server_tool_use, name: web_search, input: {query: valkey license}}
            - type: web_search_tool_result
              results: [{url: "https://valkey.io/", title: Valkey}]
            - type: text
              text: BSD 3-Clause.
              citations: [{url: "https://valkey.io/", title: Valkey, cited_text: BSD}]
    default:
      reply:
        content: [{type: text, text: Nothing is scripted for that.}]
    faults: {rate: 0.1, statuses: [429, 529], seed: 7}

Serve it and point dagwright, or anything built on the SDK, at it::

    dagwright fake-llm --script script.yaml --port 8787
    # or: python -m dagwright.testing.fake_anthropic --script script.yaml --port 8787
    export ANTHROPIC_BASE_URL=http://127.0.0.1:8787
    export ANTHROPIC_API_KEY=anything

Or in a test::

    with FakeAnthropicServer(Script.load("script.yaml")) as server:
        client = anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0)
        client.messages.create(model="claude-sonnet-5-5", max_tokens=100, messages=[...])
        assert server.requests[0].entry_index == 0

It is at least as strict as the real API (:mod:`dagwright.testing.fake_anthropic_rules`):
an unknown model id gets the real 404 (the installed SDK's ids are known; add others with
the script's ``models:`` list, ``--model`` or ``DAGWRIGHT_FAKE_LLM_MODELS``), and a broken
conversation, tool list, sampling or thinking parameter, or cache breakpoint gets the real
400 and its message; so does a server tool (web search, web fetch) of an unknown
version, with both domain lists or a ``max_uses`` below 1
(:mod:`dagwright.testing.fake_anthropic_server_tools`, which also plays their calls and
results, ``max_uses_exceeded`` and ``usage.server_tool_use``). Usage counts the JSON
sent, about four characters a token, and
``cache_control`` prefixes are written and read as the real prompt cache does
(:mod:`dagwright.testing.fake_anthropic_tokens`). A request no entry matches, with no
default, gets a 400 naming it: a 500 would be retried and open the client's breaker.

Endpoints: ``POST /v1/messages`` (the API; ``"stream": true`` is answered with server-sent
events, see :mod:`dagwright.testing.fake_anthropic_stream`), ``POST
/v1/messages/count_tokens`` (same checks; ``{"input_tokens": n}``, no script entry used),
the Message Batches API (``/v1/messages/batches``: create, retrieve, results, cancel;
:mod:`dagwright.testing.fake_anthropic_batches`), ``GET /_log`` (the request log as
JSON), ``POST /_reset`` (clear the log, the batches, the prompt cache
and restore the script as it was given), ``GET /_health``. A request needs an ``x-api-key``
or an ``authorization`` header, with any value, or it gets a 401; the SDK 2.12 sends its
key as ``Authorization: Bearer ...``, and with no key configured raises ``TypeError``
before sending anything.

What the ``anthropic`` SDK 2.12 raises for each answer: 400 ``BadRequestError``, 401
``AuthenticationError``, 429 ``RateLimitError``, 500 ``InternalServerError``, 529
``OverloadedError`` (a subclass of ``InternalServerError``), ``malformed: json`` a plain
``json.JSONDecodeError`` (the SDK does not wrap it), ``malformed: schema`` nothing by default
(the SDK builds the ``Message`` without validating it: ``content``, ``usage`` and
``stop_reason`` are None, so the caller fails later with a ``TypeError`` or
``AttributeError``) but ``APIResponseValidationError`` from a client made with
``_strict_response_validation=True``, and a ``delay_s`` longer than the client's timeout
``APITimeoutError``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from dagwright.errors import ConfigurationError
from dagwright.testing.fake_anthropic_answers import Answer, error_body, json_answer
from dagwright.testing.fake_anthropic_batches import MessageBatches
from dagwright.testing.fake_anthropic_playback import LoggedRequest, Playback
from dagwright.testing.fake_anthropic_script import FaultInjection, Script, ScriptEntry
from dagwright.testing.fake_anthropic_stream import write_event_stream

__all__ = ["FakeAnthropicServer", "LoggedRequest", "main"]

BATCHES_PATH = "/v1/messages/batches"

logger = logging.getLogger(__name__)

EXTRA_MODELS_ENV = "DAGWRIGHT_FAKE_LLM_MODELS"
SHUTDOWN_POLL_S = 0.05  # how long stop() may wait for the serving loop to notice


class _FakeHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that carries its playback and can hang up on every client."""

    daemon_threads = True
    request_queue_size = 128  # the default 5 drops bursts of connects: a 1 s SYN retry each

    def __init__(
        self, address: tuple[str, int], playback: Playback, batches: MessageBatches
    ) -> None:
        self.playback = playback
        self.batches = batches
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _FakeAnthropicHandler)

    def process_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        if isinstance(request, socket.socket):
            with self._connections_lock:
                self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket | tuple[bytes, socket.socket]) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def hang_up(self) -> None:
        """Close every open connection: a keep-alive connection's handler thread would
        otherwise go on answering after the server stopped accepting new ones."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _FakeAnthropicHandler(BaseHTTPRequestHandler):
    """Routes each HTTP request; any error becomes a 500 answer, never a dropped connection."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall
    server: _FakeHTTPServer

    def do_GET(self) -> None:
        self._reply(b"")

    def do_POST(self) -> None:
        self._reply(self._read_body())

    def _reply(self, raw_body: bytes) -> None:
        answer, logged = self._answer_safely(raw_body)
        if self._send(answer) and logged is not None:
            self.server.playback.answered(logged)

    def _answer_safely(self, raw_body: bytes) -> tuple[Answer, LoggedRequest | None]:
        try:
            return self._route(urlsplit(self.path).path, raw_body)
        except Exception as exc:  # a bug must reach the test as an answer, not a hang-up
            logger.exception("fake-anthropic failed to answer %s %s", self.command, self.path)
            return json_answer(500, error_body("api_error", f"fake-anthropic bug: {exc!r}")), None

    def _route(self, path: str, raw_body: bytes) -> tuple[Answer, LoggedRequest | None]:
        """The answer, and the log entry of a ``/v1/messages`` request."""
        playback = self.server.playback
        route = (self.command, path)
        headers = {name.lower(): value for name, value in self.headers.items()}
        if route == ("POST", "/v1/messages"):
            return playback.receive(raw_body, headers)
        if route == ("POST", "/v1/messages/count_tokens"):
            return playback.count_tokens(raw_body, headers)
        if path.startswith(BATCHES_PATH):
            return self._batches_route(path, raw_body, headers), None
        if route == ("GET", "/_log"):
            return json_answer(200, [request.to_json() for request in playback.requests]), None
        if route == ("POST", "/_reset"):
            playback.reset()
            self.server.batches.reset()
            return json_answer(200, {"status": "reset"}), None
        if route == ("GET", "/_health"):
            return json_answer(200, {"status": "ok"}), None
        message = (
            "fake-anthropic serves POST /v1/messages and /v1/messages/count_tokens, "
            f"not {self.command} {path}"
        )
        return json_answer(404, error_body("not_found_error", message)), None

    def _batches_route(self, path: str, raw_body: bytes, headers: dict[str, str]) -> Answer:
        """The Message Batches endpoints (``fake_anthropic_batches``)."""
        batches, playback = self.server.batches, self.server.playback
        if not (headers.get("x-api-key") or headers.get("authorization")):
            return json_answer(401, error_body("authentication_error", "an API key is required"))
        base_url = f"http://{headers.get('host', '127.0.0.1')}"
        batch_id, _, action = path.removeprefix(BATCHES_PATH).strip("/").partition("/")
        if (self.command, batch_id, action) == ("POST", "", ""):
            return batches.create(raw_body, headers, playback.play_batched, base_url)
        if (self.command, action) == ("GET", ""):
            return batches.retrieve(batch_id, base_url)
        if (self.command, action) == ("GET", "results"):
            return batches.results(batch_id)
        if (self.command, action) == ("POST", "cancel"):
            return batches.cancel(batch_id, base_url)
        message = f"fake-anthropic serves no {self.command} {path}"
        return json_answer(404, error_body("not_found_error", message))

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            self.close_connection = True  # the body's end is unknown: the stream is unusable
            return b""
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, answer: Answer) -> bool:
        """Send the answer (after its delay); False if the client had left."""
        if answer.delay_s:
            time.sleep(answer.delay_s)
        try:
            if answer.stream is not None:
                write_event_stream(self, answer.body, answer.headers, answer.stream)
                return True
            self.send_response(answer.status, _reason(answer.status))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
        except OSError:
            logger.debug("the client left before its answer (timed out?)")
            return False
        return True

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug(format, *args)


def _reason(status: int) -> str:
    if status == 529:
        return "Overloaded"  # Anthropic's own status, unknown to http.HTTPStatus
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class FakeAnthropicServer:
    """The fake Messages API on a loopback port, served from a daemon thread.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. With ``port=0``
    (the default) the system picks a free port; :attr:`base_url` names it once started.
    ``extra_models`` are model ids to accept besides the SDK's and the script's ``models``.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        extra_models: Sequence[str] = (),
    ) -> None:
        script = script if script is not None else Script()
        self._playback = Playback(script, extra_models=extra_models)
        self.batches = MessageBatches()
        """The Message Batches the fake holds: set ``batches.processing_s`` to keep a
        batch ``in_progress`` that long; ``batches.expire_all()`` plays the 24-hour limit."""
        self._address = (host, port)
        self._http: _FakeHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeAnthropicServer:
        """Bind the port and serve from a daemon thread; returns self, for chaining."""
        if self._http is not None:
            raise RuntimeError("this FakeAnthropicServer is already started")
        self._http = _FakeHTTPServer(self._address, self._playback, self.batches)
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_S},
            name=f"fake-anthropic:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port; answers still being delayed are abandoned."""
        if self._http is None:
            return
        self._http.shutdown()
        self._http.server_close()
        self._http.hang_up()
        if self._thread is not None:
            self._thread.join()
        self._http, self._thread = None, None

    def __enter__(self) -> FakeAnthropicServer:
        return self.start() if self._http is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port served on (the real one when constructed with ``port=0``)."""
        if self._http is None:
            raise RuntimeError("start the FakeAnthropicServer before asking for its port")
        return int(self._http.server_address[1])

    @property
    def base_url(self) -> str:
        """What the SDK's ``base_url`` and ``ANTHROPIC_BASE_URL`` take: ``http://host:port``."""
        return f"http://{self._address[0]}:{self.port}"

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of the ``/v1/messages`` requests answered so far, oldest first (the
        Messages calls: token counts are in ``token_counts``)."""
        return [one for one in self._playback.requests if one.endpoint == "messages"]

    @property
    def batched_requests(self) -> list[LoggedRequest]:
        """The requests of Message Batches played so far, oldest first."""
        return [one for one in self._playback.requests if one.endpoint == "batch"]

    @property
    def token_counts(self) -> list[LoggedRequest]:
        """The ``/v1/messages/count_tokens`` requests answered so far, oldest first."""
        return [one for one in self._playback.requests if one.endpoint == "count_tokens"]

    def add(self, *entries: ScriptEntry | Mapping[str, Any]) -> None:
        """Append entries (models, or dicts as a script file would hold them) to the script."""
        self._playback.add([ScriptEntry.model_validate(entry) for entry in entries])

    def set_fault_rate(
        self, rate: float, statuses: Sequence[int] = (429, 500, 529), seed: int | None = None
    ) -> None:
        """Answer a random fault, one of ``statuses``, to a ``rate`` fraction of requests."""
        self._playback.set_faults(
            FaultInjection(rate=rate, statuses=tuple(statuses), seed=seed) if rate else None
        )

    def reset(self) -> None:
        """Clear the log and the batches, and restore the script as given (what ``POST
        /_reset`` does)."""
        self._playback.reset()
        self.batches.reset()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a script until SIGINT or SIGTERM: 0 when stopped, 2 for a bad script, 1 if the
    port cannot be bound."""
    args = _parse_args(argv)
    try:
        script = Script.load(args.script)
    except ConfigurationError as exc:
        print(f"fake-anthropic: {exc}", file=sys.stderr)
        return 2
    try:
        server = FakeAnthropicServer(
            script, host=args.host, port=args.port, extra_models=_extra_models(args.model)
        ).start()
    except OSError as exc:
        print(f"fake-anthropic: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    with server:
        print(f"fake Anthropic API listening on {server.base_url} (set ANTHROPIC_BASE_URL to it)")
        sys.stdout.flush()
        _wait_for_stop_signal()
    return 0


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="dagwright fake-llm", description="Serve a fake Anthropic Messages API."
    )
    parser.add_argument("--script", required=True, help="YAML or JSON script of answers")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help=f"a model id to accept besides the SDK's (repeatable; also ${EXTRA_MODELS_ENV}, "
        "comma-separated)",
    )
    return parser.parse_args(argv)


def _extra_models(flagged: Sequence[str]) -> list[str]:
    """Model ids from ``--model`` flags and the environment variable, comma-separated."""
    listed = os.environ.get(EXTRA_MODELS_ENV, "").split(",")
    return [*flagged, *(model.strip() for model in listed if model.strip())]


def _wait_for_stop_signal() -> None:
    """Block until SIGINT or SIGTERM, then put the previous handlers back."""
    stop_requested = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda *_: stop_requested.set())
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        stop_requested.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())

"""The fake Anthropic API, driven through the real ``anthropic`` SDK with ``max_retries=0``.

What the SDK raises for each kind of answer is pinned here, so that an SDK upgrade that
changes it fails these tests rather than surprising the code that catches those errors.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import Message, TextBlock, ToolUseBlock

from dagwright.errors import ConfigurationError
from dagwright.testing import FakeAnthropicServer, Script, ScriptEntry
from dagwright.testing.fake_anthropic import main
from tests.support.processes import REPO_ROOT

MODEL = "claude-sonnet-5-5"


def text_entry(text: str, **fields: Any) -> dict[str, Any]:
    return {"reply": {"content": [{"type": "text", "text": text}]}, **fields}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def ask(
    client: anthropic.Anthropic,
    text: str = "hi",
    *,
    model: str = MODEL,
    messages: list[Any] | None = None,
    **kwargs: Any,
) -> Message:
    """``messages.create`` with defaults: one user message saying ``text``."""
    messages = messages if messages is not None else [user(text)]
    return client.messages.create(model=model, max_tokens=64, messages=messages, **kwargs)


def reply_text(message: Message) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextBlock))


def raw_request(
    url: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """An HTTP request the SDK would refuse to send; returns the status and the JSON answer."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def post_messages(server: FakeAnthropicServer, body: Any, **headers: str) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return raw_request(f"{server.base_url}/v1/messages", "POST", raw, headers)


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as fake:
        yield fake


@pytest.fixture
def client(server: FakeAnthropicServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="sk-test", base_url=server.base_url, max_retries=0) as sdk:
        yield sdk


# Replies


def test_a_text_reply_becomes_a_typed_message(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("Hello there, world!"))

    message = ask(client)

    assert isinstance(message, Message)
    assert message.id.startswith("msg_")
    assert message.model == MODEL
    assert message.role == "assistant"
    assert message.content == [TextBlock(type="text", text="Hello there, world!")]
    assert message.stop_reason == "end_turn"
    assert message.stop_sequence is None
    assert message.usage.input_tokens >= 1
    assert message.usage.output_tokens == len("Hello there, world!") // 4


def test_a_tool_use_reply_becomes_typed_blocks_with_generated_ids(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(
        {
            "reply": {
                "content": [
                    {"type": "text", "text": "Searching."},
                    {"type": "tool_use", "name": "search", "input": {"q": "paris"}},
                    {"type": "tool_use", "name": "fetch", "input": {}, "id": "toolu_mine"},
                ],
                "usage": {"input_tokens": 120, "output_tokens": 9},
                "model": "claude-other",
            }
        }
    )

    message = ask(client)

    text, search, fetch = message.content
    assert isinstance(text, TextBlock)
    assert isinstance(search, ToolUseBlock)
    assert (search.id, search.name, search.input) == ("toolu_1", "search", {"q": "paris"})
    assert isinstance(fetch, ToolUseBlock)
    assert fetch.id == "toolu_mine"
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (120, 9)
    assert message.model == "claude-other"


def test_a_scripted_stop_reason_wins(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(
        {"reply": {"content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens"}}
    )

    assert ask(client).stop_reason == "max_tokens"


# Matching

SEARCH_CALL = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_a", "name": "search", "input": {}}],
}
SEARCH_RESULT = user([{"type": "tool_result", "tool_use_id": "toolu_a", "content": "42 results"}])


@pytest.mark.parametrize(
    ("match", "matching", "other"),
    [
        ({"model": "claude-opus-4-6"}, {"model": "claude-opus-4-6"}, {}),
        ({"system_contains": "pirate"}, {"system": "You are a pirate."}, {"system": "Be nice."}),
        (
            {"system_contains": "pirate"},
            {"system": [{"type": "text", "text": "Be nice."}, {"type": "text", "text": "pirate"}]},
            {"system": [{"type": "text", "text": "Be nice."}]},
        ),
        ({"last_user_contains": "weather"}, {"text": "What is the weather?"}, {"text": "hi"}),
        (
            {"last_user_contains": "42 results"},
            {"messages": [user("go"), SEARCH_CALL, SEARCH_RESULT]},
            {"messages": [user("go")]},
        ),
        (
            {"tool_result_for": "search"},
            {"messages": [user("go"), SEARCH_CALL, SEARCH_RESULT]},
            {
                "messages": [
                    user("go"),
                    {
                        **SEARCH_CALL,
                        "content": [
                            {"type": "tool_use", "id": "toolu_a", "name": "fetch", "input": {}}
                        ],
                    },
                    SEARCH_RESULT,
                ]
            },
        ),
        (
            {"messages_count": 3},
            {"messages": [user("a"), {"role": "assistant", "content": "b"}, user("c")]},
            {"messages": [user("a")]},
        ),
        (
            {"has_tools": True},
            {"tools": [{"name": "search", "input_schema": {"type": "object"}}]},
            {},
        ),
    ],
)
def test_an_entry_answers_only_requests_its_match_holds_for(
    server: FakeAnthropicServer,
    client: anthropic.Anthropic,
    match: dict[str, Any],
    matching: dict[str, Any],
    other: dict[str, Any],
) -> None:
    server.add(text_entry("matched", match=match, times=-1))
    server.add(text_entry("fallthrough", times=-1))

    assert reply_text(ask(client, **matching)) == "matched"
    assert reply_text(ask(client, **other)) == "fallthrough"


def test_every_condition_of_a_match_must_hold(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("both", match={"system_contains": "pirate", "messages_count": 1}))
    server.add(text_entry("not both", times=-1))

    assert reply_text(ask(client, system="pirate", messages=[user("a"), user("b")])) == "not both"
    assert reply_text(ask(client, system="pirate")) == "both"


def test_entries_answer_in_order_until_their_uses_run_out(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("first", times=2), text_entry("then forever", times=-1))

    answers = [reply_text(ask(client)) for _ in range(5)]

    assert answers == ["first", "first", "then forever", "then forever", "then forever"]
    assert [request.entry_index for request in server.requests] == [0, 0, 1, 1, 1]


def test_the_default_answers_when_no_entry_matches() -> None:
    script = Script.model_validate(
        {
            "entries": [text_entry("special", match={"last_user_contains": "special"})],
            "default": text_entry("default"),
        }
    )
    with FakeAnthropicServer(script) as server:
        sdk = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
        answers = [reply_text(ask(sdk, text)) for text in ("hi", "special", "special")]

    assert answers == ["default", "special", "default"]
    assert [(r.entry_index, r.answered_by) for r in server.requests] == [
        (None, "default"),
        (0, "entry"),
        (None, "default"),
    ]


def test_no_matching_entry_is_a_readable_400_that_no_client_retries(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("never", match={"model": "claude-other"}))

    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(client, "what about this?", system="You are terse.")

    message = caught.value.api_message or ""
    assert message.startswith("fake-anthropic: no script entry matches this request")
    assert "last_user='what about this?'" in message
    assert "system='You are terse.'" in message
    assert server.requests[0].answered_by == "no_match"


# Faults and what the SDK raises for them


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (400, anthropic.BadRequestError),
        (401, anthropic.AuthenticationError),
        (429, anthropic.RateLimitError),
        (500, anthropic.InternalServerError),
        (529, anthropic.OverloadedError),
    ],
)
def test_a_scripted_status_raises_the_sdks_class_for_it(
    server: FakeAnthropicServer,
    client: anthropic.Anthropic,
    status: int,
    error_class: type[anthropic.APIStatusError],
) -> None:
    server.add({"status": status})

    with pytest.raises(anthropic.APIStatusError) as caught:
        ask(client)

    assert type(caught.value) is error_class
    assert caught.value.status_code == status
    assert caught.value.request_id == caught.value.response.headers["request-id"]


def test_overloaded_is_an_internal_server_error_to_the_sdk() -> None:
    assert issubclass(anthropic.OverloadedError, anthropic.InternalServerError)


def test_a_429_carries_retry_after(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add({"status": 429, "headers": {"Retry-After": "7"}}, {"status": 429})

    with pytest.raises(anthropic.RateLimitError) as scripted:
        ask(client)
    with pytest.raises(anthropic.RateLimitError) as defaulted:
        ask(client)

    assert scripted.value.response.headers["retry-after"] == "7"
    assert defaulted.value.response.headers["retry-after"] == "0"
    assert scripted.value.type == "rate_limit_error"


def test_malformed_json_raises_a_plain_json_decode_error(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add({"malformed": "json"})

    with pytest.raises(json.JSONDecodeError) as caught:
        ask(client)

    assert type(caught.value) is json.JSONDecodeError  # the SDK does not wrap it


def test_a_body_missing_fields_passes_unless_the_client_validates_strictly(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add({"malformed": "schema", "times": 2})
    strict = anthropic.Anthropic(
        api_key="k", base_url=server.base_url, max_retries=0, _strict_response_validation=True
    )

    lenient = ask(client)
    with pytest.raises(anthropic.APIResponseValidationError) as caught:
        ask(strict)

    assert (lenient.content, lenient.usage, lenient.stop_reason) == (None, None, None)
    assert type(caught.value) is anthropic.APIResponseValidationError


def test_a_delay_longer_than_the_timeout_raises_api_timeout_error(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("too late", delay_s=1.0))

    with pytest.raises(anthropic.APITimeoutError) as caught:
        ask(client.with_options(timeout=0.2))

    assert type(caught.value) is anthropic.APITimeoutError


def test_fault_rate_one_always_faults_and_uses_no_entry(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("scripted"))
    server.set_fault_rate(1.0)

    for _ in range(10):
        with pytest.raises(anthropic.APIStatusError):
            ask(client)
    server.set_fault_rate(0.0)

    assert reply_text(ask(client)) == "scripted"
    faults = server.requests[:10]
    assert {r.status for r in faults} <= {429, 500, 529}
    assert {(r.entry_index, r.answered_by) for r in faults} == {(None, "fault")}


def test_fault_rate_zero_never_faults(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("fine", times=-1))
    server.set_fault_rate(0.0, seed=1)

    assert [reply_text(ask(client)) for _ in range(10)] == ["fine"] * 10


def test_a_seeded_fault_rate_repeats_the_same_faults(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    def statuses_with_seed(seed: int) -> list[int]:
        server.reset()
        server.add(text_entry("fine", times=-1))
        server.set_fault_rate(0.5, statuses=(429, 529), seed=seed)
        for _ in range(20):
            with contextlib.suppress(anthropic.APIStatusError):
                ask(client)
        return [request.status for request in server.requests]

    first = statuses_with_seed(7)

    assert statuses_with_seed(7) == first
    assert {200, 429, 529} == set(first)
    assert statuses_with_seed(8) != first


# Requests the real API would reject


def test_a_request_without_max_tokens_is_a_400(server: FakeAnthropicServer) -> None:
    status, body = post_messages(server, {"model": MODEL, "messages": []}, **{"x-api-key": "k"})

    assert status == 400
    assert body["error"] == {
        "type": "invalid_request_error",
        "message": "max_tokens: Field required",
    }


def test_a_body_that_is_not_json_is_a_400_and_the_server_goes_on(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("still here"))

    status, body = post_messages(server, b"{not json", **{"x-api-key": "k"})

    assert (status, body["error"]["type"]) == (400, "invalid_request_error")
    assert reply_text(ask(client)) == "still here"


def test_a_request_without_a_key_is_a_401(server: FakeAnthropicServer) -> None:
    status, body = post_messages(server, {"model": MODEL, "max_tokens": 5, "messages": []})

    assert status == 401
    assert body["error"]["type"] == "authentication_error"
    assert server.requests[0].answered_by == "rejected"


def test_the_sdk_itself_refuses_to_send_without_a_key(
    server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    keyless = anthropic.Anthropic(base_url=server.base_url, max_retries=0)

    with pytest.raises(TypeError, match="Could not resolve authentication method"):
        ask(keyless)

    assert server.requests == []


# The request log


def test_the_log_records_each_request_and_redacts_keys(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("one"), {"status": 500})

    ask(client, "first")
    with pytest.raises(anthropic.InternalServerError):
        ask(client, "second")
    post_messages(server, {"model": MODEL, "max_tokens": 5, "messages": []}, **{"x-api-key": "k"})

    first, second, raw = server.requests
    assert first.body == {"model": MODEL, "max_tokens": 64, "messages": [user("first")]}
    canonical = json.dumps(first.body, sort_keys=True, separators=(",", ":"))
    assert first.body_sha256 == hashlib.sha256(canonical.encode()).hexdigest()
    assert [(r.status, r.entry_index) for r in (first, second, raw)] == [
        (200, 0),
        (500, 1),
        (400, None),  # an empty conversation: the real API's 400
    ]
    assert first.headers["authorization"] == "***"  # SDK 2.12 sends the key as a bearer token
    assert raw.headers["x-api-key"] == "***"
    assert "sk-test" not in json.dumps([r.to_json() for r in server.requests])
    assert first.at <= second.at <= raw.at


def test_an_unknown_path_is_a_404(server: FakeAnthropicServer) -> None:
    status, body = raw_request(f"{server.base_url}/v1/complete", "POST", b"{}")

    assert (status, body["error"]["type"]) == (404, "not_found_error")


def test_the_log_reset_and_health_endpoints(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("once"))
    ask(client)

    status, log = raw_request(f"{server.base_url}/_log")
    assert status == 200
    assert [(entry["status"], entry["entry_index"]) for entry in log] == [(200, 0)]
    assert log[0]["headers"]["authorization"] == "***"

    assert raw_request(f"{server.base_url}/_reset", "POST", b"") == (200, {"status": "reset"})
    assert server.requests == []
    assert raw_request(f"{server.base_url}/_health") == (200, {"status": "ok"})


def test_reset_restores_the_script_as_given() -> None:
    script = Script.model_validate({"entries": [text_entry("once")]})
    with FakeAnthropicServer(script) as server:
        sdk = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
        server.add(text_entry("added"))
        assert [reply_text(ask(sdk)) for _ in range(2)] == ["once", "added"]
        server.reset()
        assert reply_text(ask(sdk)) == "once"
        with pytest.raises(anthropic.BadRequestError):  # nothing left: unscripted
            ask(sdk)


# Serving


def test_concurrent_requests_are_all_answered(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(text_entry("together", delay_s=0.3, times=-1))
    start_together = threading.Barrier(8)
    answers: queue.Queue[Message] = queue.Queue()

    def one_request() -> None:
        start_together.wait()
        answers.put(ask(client))

    threads = [threading.Thread(target=one_request) for _ in range(8)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    elapsed = time.monotonic() - started

    messages = [answers.get_nowait() for _ in range(8)]
    assert len({message.id for message in messages}) == 8
    assert len(server.requests) == 8
    assert elapsed < 8 * 0.3 / 2  # answered side by side, not one after another


def test_stop_hangs_up_on_keep_alive_connections() -> None:
    server = FakeAnthropicServer(Script.model_validate({"default": text_entry("up")})).start()
    sdk = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
    assert reply_text(ask(sdk)) == "up"

    server.stop()

    with pytest.raises(anthropic.APIConnectionError):
        ask(sdk)


# Scripts


def test_scripts_load_from_yaml_and_json(tmp_path: Path) -> None:
    yaml_path = tmp_path / "script.yaml"
    yaml_path.write_text(
        "entries:\n"
        "  - match: {last_user_contains: weather}\n"
        "    reply:\n"
        "      content:\n"
        "        - {type: tool_use, name: get_weather, input: {city: Paris}}\n"
        "faults: {rate: 0.1, seed: 3}\n"
    )
    json_path = tmp_path / "script.json"
    json_path.write_text(json.dumps({"default": {"status": 529}}))

    from_yaml, from_json = Script.load(yaml_path), Script.load(json_path)

    assert from_yaml.entries[0].match.last_user_contains == "weather"
    assert from_yaml.faults is not None and from_yaml.faults.statuses == (429, 500, 529)
    assert from_json.default == ScriptEntry(status=529)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("entries: [{reply: {content: []}, tims: 2}]", "tims"),
        ("entries: [{match: {last_user: x}, status: 500}]", "last_user"),
        ("entries: [{times: 2}]", "exactly one of reply, status or malformed"),
        ("entries: [{status: 429, malformed: json}]", "exactly one of reply, status or malformed"),
        ("entries: [{status: 500, times: 0}]", "times must be at least 1"),
        ("default: {status: 500, times: 3}", "remove its match and times"),
        ("faults: {rate: 1.5}", "rate"),
        ("entries: [unclosed", "cannot be parsed"),
    ],
)
def test_a_bad_script_is_a_configuration_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(text)

    with pytest.raises(ConfigurationError, match=re.escape(problem)):
        Script.load(path)


# The command line


@pytest.mark.subprocess
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_the_command_serves_a_script_until_signalled(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("default:\n  reply:\n    content: [{type: text, text: from the cli}]\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "dagwright.testing.fake_anthropic", "--script", str(script)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = first_line(process, timeout=10)
        found = re.fullmatch(
            r"fake Anthropic API listening on (http://127\.0\.0\.1:\d+) "
            r"\(set ANTHROPIC_BASE_URL to it\)\n",
            line,
        )
        assert found, line
        sdk = anthropic.Anthropic(api_key="k", base_url=found.group(1), max_retries=0)
        assert reply_text(ask(sdk)) == "from the cli"

        process.send_signal(stop_signal)

        assert process.wait(timeout=10) == 0
        assert process.stderr is not None and process.stderr.read() == ""
    finally:
        process.kill()
        process.wait()


def test_main_rejects_a_bad_script_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("entries: [{tims: 1}]\n")

    assert main(["--script", str(script)]) == 2
    assert "tims" in capsys.readouterr().err


def first_line(process: subprocess.Popen[str], *, timeout: float) -> str:
    """The first line the process prints, waiting at most ``timeout`` seconds."""
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no line from the fake-anthropic command in {timeout}s") from None

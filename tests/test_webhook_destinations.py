"""Where a webhook may go: the one egress filter (dagwright/egress/) refuses loopback,
private, link-local, unique-local, multicast, reserved and metadata destinations, in
every spelling, when the run is submitted (422 / InputError) and again, after the name
is resolved, when the webhook is sent. Delivery records do not tell a closed port from a
silent one. The receivers are loopback listeners only; the tests that deliver to them
allow-list 127.0.0.1 explicitly (``egress_allow``), as a deployment would a private
receiver."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterator

import pytest
import redis

from dagwright import Client, RunStatus
from dagwright.egress import EgressPolicy, check_url, checked_addresses, refused_kind
from dagwright.egress.transport import egress_client
from dagwright.errors import EgressRefusedError, InputError
from dagwright.settings import Settings
from dagwright.webhooks.records import Delivery
from dagwright.webhooks.sender import NO_ANSWER, REFUSED
from tests.support.api_server import ApiServer
from tests.support.processes import Workers
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import WebhookReceiver

HOSTILE_HOSTS = (
    "127.0.0.1",
    "[::1]",
    "localhost",
    "localhost.",
    "LocalHost",
    "hooks.localhost",
    "2130706433",  # 127.0.0.1 as one number
    "0x7f.0.0.1",
    "0x7f000001",
    "0177.0.0.1",  # octal
    "127.1",
    "0",  # 0.0.0.0
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::127.0.0.1]",  # IPv4-compatible
    "[64:ff9b::7f00:1]",  # NAT64 of 127.0.0.1
    "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
    "[2002:7f00:1::]",  # 6to4 of 127.0.0.1
    "169.254.169.254",
    "[fd00:ec2::254]",
    "metadata.google.internal",
    "metadata.google.internal.",
    "100.100.100.200",  # Alibaba's metadata (shared address space)
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "[fe80::1]",
    "[fc00::1]",
    "224.0.0.1",
    "239.255.255.250",
    "[ff02::1]",
    "255.255.255.255",
    "240.0.0.1",
)


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_every_spelling_of_a_refused_destination_is_refused_by_the_filter(host: str) -> None:
    with pytest.raises(EgressRefusedError, match="DAGWRIGHT_EGRESS_ALLOW"):
        check_url(f"http://{host}:8080/hook", EgressPolicy())


def test_public_addresses_and_names_pass_and_the_allow_list_opens_only_what_it_lists() -> None:
    for url in (
        "https://hooks.example.com/x",
        "http://93.184.216.34/",
        "https://[2606:4700::1111]/",
    ):
        check_url(url, EgressPolicy())
    for address in ("8.8.8.8", "2001:4860:4860::8888", "64:ff9b::808:808"):
        assert refused_kind(ipaddress.ip_address(address)) is None, address
    loopback_only = EgressPolicy.of(["127.0.0.1/32", "receiver.internal"])
    check_url("http://127.0.0.1:9/", loopback_only)
    check_url("http://receiver.internal/", loopback_only)
    for refused in (
        "http://127.0.0.2/",
        "http://2130706434/",
        "http://localhost/",
        "http://[::1]/",
    ):
        with pytest.raises(EgressRefusedError):
            check_url(refused, loopback_only)
    with pytest.raises(InputError, match="only http and https"):
        check_url("file:///etc/passwd", EgressPolicy())


def test_a_name_is_checked_on_the_addresses_it_resolves_to() -> None:
    # "localhost" here stands for any name whose DNS answer is an internal address.
    with pytest.raises(EgressRefusedError, match=r"resolves to (127\.0\.0\.1|::1) \(loopback\)"):
        checked_addresses("localhost", 80, EgressPolicy.of(["localhost-is-not-listed"]))
    with pytest.raises(EgressRefusedError, match=r"resolves to 127\.0\.0\.1 \(loopback\)"):
        checked_addresses("0x7f.1", 80, EgressPolicy())
    allowed = checked_addresses("localhost", 80, EgressPolicy.of(["127.0.0.0/8", "::1"]))
    assert ipaddress.ip_address("127.0.0.1") in allowed


def test_the_client_connects_to_the_checked_address_and_keeps_the_name(
    receiver: WebhookReceiver,
) -> None:
    # The name resolved once, by the check; the connection made to the address it
    # checked, the request still naming the host (Host header; TLS's server name alike).
    port = receiver.url.rsplit(":", 1)[1]
    loopback = EgressPolicy.of(["127.0.0.0/8", "::1"])  # localhost may resolve to both
    with egress_client(loopback, timeout_s=5) as http:
        answer = http.post(f"http://localhost:{port}/named", content=b"{}")
        assert answer.status_code == 200
        with pytest.raises(EgressRefusedError):
            http.post(f"http://10.255.255.1:{port}/private", content=b"{}")  # not listed
    (received,) = receiver.to("/named")
    assert received.headers["Host"] == f"localhost:{port}"
    with egress_client(EgressPolicy(), timeout_s=5) as http, pytest.raises(EgressRefusedError):
        http.post(f"{receiver.url}/default", content=b"{}")
    assert receiver.to("/default") == []


def _plan(url: str) -> dict[str, object]:
    node = {"id": "n", "type": "function", "function": "noop"}
    return {"nodes": [node], "webhooks": [{"url": url}]}


def test_a_run_aiming_a_webhook_inside_is_refused_when_submitted(
    client: Client, redis_client: redis.Redis
) -> None:
    for host in ("127.0.0.1", "[::ffff:127.0.0.1]", "0x7f.0.0.1", "169.254.169.254", "localhost"):
        url = f"http://{host}:8080/hook"
        with pytest.raises(InputError, match="DAGWRIGHT_EGRESS_ALLOW"):
            client.submit(_plan(url))
        plain = {"nodes": [{"id": "n", "type": "function", "function": "noop"}]}
        with pytest.raises(InputError, match="DAGWRIGHT_EGRESS_ALLOW"):
            client.submit(plain, webhooks=[url])
        with pytest.raises(InputError, match="DAGWRIGHT_EGRESS_ALLOW"):
            client.schedules.add("hooked", plan=plain, every_s=3600, webhooks=[url])
    assert client.list_runs() == [] and client.schedules.list() == []
    assert not redis_client.keys("*webhook*")


def test_the_api_answers_422_for_a_webhook_aimed_inside(api: ApiServer) -> None:
    plan = {"nodes": [{"id": "n", "type": "function", "function": "noop"}]}
    with api.http() as http:
        for url in (
            "http://2130706433/",
            "http://[fd00:ec2::254]/",
            "http://metadata.google.internal/",
        ):
            answer = http.post("/api/v1/runs", json={"plan": plan, "webhooks": [{"url": url}]})
            assert answer.status_code == 422, answer.text
            assert "DAGWRIGHT_EGRESS_ALLOW" in answer.json()["detail"]


def test_a_password_in_a_webhook_url_is_refused_and_never_shown(client: Client) -> None:
    url = "https://hook-user:hook-pass-93f1@hooks.example.com/x"
    with pytest.raises(InputError, match="secret_env") as refused:
        client.submit(_plan(url))
    assert "hook-pass-93f1" not in str(refused.value) and "hook-user" not in str(refused.value)
    # A record of a run from before such URLs were refused shows none of it either.
    record = Delivery(id="r.1.0", run_id="r", hook=0, url=url, event="run.succeeded", queued_ms=0)
    assert record.url == "https://***@hooks.example.com/x"
    assert "hook-pass-93f1" not in record.model_dump_json()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as listening:
        yield listening


def test_a_name_resolving_to_loopback_is_refused_when_sent(
    subprocess_settings: Settings,
    workers: Workers,
    redis_client: redis.Redis,
    receiver: WebhookReceiver,
) -> None:
    # The submitting side allow-lists the name (as a misconfigured API server might);
    # the sending worker does not: it resolves the name, and refuses the loopback answer.
    sender = subprocess_settings.model_copy(
        update={"webhook_backoff_s": 0.2, "webhook_max_attempts": 2, "webhook_timeout_s": 3.0}
    )
    workers.start(sender, pool="threads")
    client = Client(sender.model_copy(update={"egress_allow": ["localhost"]}))
    port = receiver.url.rsplit(":", 1)[1]
    run = client.submit(_plan(f"http://localhost:{port}/resolved"))
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED, workers.log_tails()
    wait_until(lambda: _given_up(client, run.run_id), timeout=60, what="the delivery given up")
    (delivery,) = client.webhooks.deliveries(run.run_id)
    assert [a.error for a in delivery.attempts] == [REFUSED, REFUSED]
    assert receiver.to("/resolved") == []


def test_a_closed_port_and_a_silent_one_read_the_same_in_the_records(
    subprocess_settings: Settings, workers: Workers, redis_client: redis.Redis
) -> None:
    settings = subprocess_settings.model_copy(
        update={
            "egress_allow": ["127.0.0.1"],  # the test's own listeners: allow-listed
            "webhook_backoff_s": 0.2,
            "webhook_max_attempts": 2,
            "webhook_timeout_s": 1.0,
        }
    )
    with _silent_listener() as silent_port:
        workers.start(settings, pool="threads")
        client = Client(settings)
        closed = f"http://127.0.0.1:{_closed_port()}/closed"
        silent = f"http://127.0.0.1:{silent_port}/silent"
        plain = {"nodes": [{"id": "n", "type": "function", "function": "noop"}]}
        run = client.submit(plain, webhooks=[closed, silent])
        assert run.wait(timeout=60).status == RunStatus.SUCCEEDED, workers.log_tails()
        wait_until(lambda: _all_given_up(client, run.run_id), timeout=60, what="both given up")
    deliveries = client.webhooks.deliveries(run.run_id)
    assert len(deliveries) == 2
    for delivery in deliveries:
        assert [(a.status_code, a.error, a.duration_ms) for a in delivery.attempts] == [
            (None, NO_ANSWER, 0),
            (None, NO_ANSWER, 0),
        ]


def _given_up(client: Client, run_id: str) -> bool:
    deliveries = client.webhooks.deliveries(run_id)
    return bool(deliveries) and deliveries[0].state == "failed"


def _all_given_up(client: Client, run_id: str) -> bool:
    deliveries = client.webhooks.deliveries(run_id)
    return len(deliveries) == 2 and all(d.state == "failed" for d in deliveries)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _silent_listener() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (a filtered port, as
    far as a client waiting for an HTTP answer can tell)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])

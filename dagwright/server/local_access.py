"""Local access: the user who started a loopback server gets in without making a token;
no other user of the machine does.

A loopback port is open to every user of the machine, so being on loopback proves
nothing about who asks. What does: a secret only this user can read. A server started
with local access (``dagwright up``'s, ``dagwright server --local-access``) makes itself
an admin API token at start, writes it to ``<data_dir>/server-<port>.token`` (0600 from
its first byte, in the 0700 data directory), and revokes it and removes the file when it
stops. Its user's tools send it as any token (``curl -H "Authorization: Bearer $(cat
...)"``); its sessions end with it.

The browser gets in by a one-time login link, ``/login/local?code=...``: the code is a
random nonce and its HMAC under the token, so whoever can read the token file can make
one (``up`` prints one, ``dagwright dashboard`` makes another) and the server checks it
with nothing stored but the nonces it has taken. Opening the link opens a dashboard
session for the token and redirects to the dashboard; the link, now in the browser's
history, opens nothing more. Codes are 32 characters, so the link fits in 80 columns.

Rejected: telling the user by the connection. Linux's ``/proc/net/tcp`` names the uid
of a connecting socket only by its port, and another user can connect from the same port
on another loopback address, or behind a TIME_WAIT row (uid 0) of a server running as
root: both were borrowed, 7 to 22 in 30 and 60 in 60 tries. SO_PEERCRED would be exact,
on a unix socket that no browser can use.

Imported by the CLI: nothing here loads FastAPI.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dagwright.errors import InputError

if TYPE_CHECKING:
    from dagwright.client import Client

LOGIN_PATH = "/login/local"
NONCE_CHARS = 16  # 12 random bytes, base64
MAC_BYTES = 12  # 96 bits: guessing online is hopeless
CODE_CHARS = NONCE_CHARS + 16


def token_file(data_dir: Path, port: int) -> Path:
    """Where the server on ``port`` keeps its local-access token."""
    return data_dir / f"server-{port}.token"


def token_name(port: int) -> str:
    """The local-access token's name: ``dagwright token list`` shows it."""
    return f"local access of the server on port {port} of {socket.gethostname()}"


def write_private(path: Path, text: str) -> None:
    """Write ``path`` atomically, readable by this user alone from its first byte: a new
    file (never an existing one, nor a link) made 0600, then renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    descriptor = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_token(data_dir: Path, port: int) -> str | None:
    """The local-access token of the server on ``port``; None if it has none (not
    started with local access, stopped, or not this user's)."""
    try:
        return token_file(data_dir, port).read_text().strip() or None
    except OSError:
        return None


def login_code(token: str) -> str:
    """A new one-time login code for the server whose token is ``token``."""
    nonce = secrets.token_urlsafe(NONCE_CHARS * 3 // 4)
    return nonce + _mac(token, nonce)


def login_url(server_url: str, token: str) -> str:
    """A one-time login link: opening it logs the browser in once."""
    return f"{server_url.rstrip('/')}{LOGIN_PATH}?code={login_code(token)}"


def _mac(token: str, nonce: str) -> str:
    digest = hmac.new(token.encode(), f"login:{nonce}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:MAC_BYTES]).decode()


@dataclass
class LocalAccess:
    """A server's local access: its token, the file holding it, and the login codes
    already taken (each opens one session)."""

    token: str
    token_id: str
    data_dir: Path
    port: int
    _taken: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take_code(self, code: str) -> bool:
        """Whether ``code`` is a login code of this server's, not taken before."""
        nonce, mac = code[:NONCE_CHARS], code[NONCE_CHARS:]
        if len(code) != CODE_CHARS or not code.isascii():  # compare_digest takes ASCII only
            return False
        if not hmac.compare_digest(mac, _mac(self.token, nonce)):
            return False
        with self._lock:
            if nonce in self._taken:
                return False
            self._taken.add(nonce)
        return True

    def close(self, client: Client) -> None:
        """Revoke the token (its sessions end) and remove its file."""
        if read_token(self.data_dir, self.port) == self.token:
            token_file(self.data_dir, self.port).unlink(missing_ok=True)
        with contextlib.suppress(InputError):  # revoked by hand already
            client.tokens.revoke(self.token_id)


def open_local_access(client: Client, data_dir: Path, port: int) -> LocalAccess:
    """Make the server's token and write it to its file, first revoking those that
    servers killed before they could (``kill -9`` of ``up``) left behind."""
    name = token_name(port)
    revoke_named(client, name)
    revoke_left_behind(client, data_dir)
    new = client.tokens.create(name, scope="admin")
    write_private(token_file(data_dir, port), new.token + "\n")
    return LocalAccess(new.token, new.info.id, data_dir, port)


def revoke_left_behind(client: Client, data_dir: Path) -> None:
    """Revoke the token of each token file whose server no longer answers, and remove
    the file. A port something answers on is left alone (it may be a live server's)."""
    for path in data_dir.glob("server-*.token"):
        port = path.name.removeprefix("server-").removesuffix(".token")
        if not port.isdigit() or answers(int(port)):
            continue
        token = read_token(data_dir, int(port))
        info = client.tokens.authenticate(token) if token else None
        if info is not None:
            client.tokens.revoke(info.id)
        path.unlink(missing_ok=True)


def answers(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def revoke_named(client: Client, name: str) -> None:
    for info in client.tokens.list():
        if info.name == name:
            client.tokens.revoke(info.id)

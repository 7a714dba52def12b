"""Flower, Celery's web monitor, on dagwright's broker.

Started the way Flower documents: as the ``flower`` sub-command of Celery's command line
(``celery [celery options] flower [flower options]``), here through the app's own
``start()``, so the broker and every Celery setting come from the dagwright app. The login
travels in Flower's ``FLOWER_BASIC_AUTH`` environment variable of this process, never on
a command line that ``ps`` would show.

Flower's own login leaves ``/metrics`` and ``/healthcheck`` open (its handlers skip the
check), and so are its static files and the pages Tornado adds: ``LoginRequiredFlower``
asks for the login before any route is looked up. Rejected: wrapping each class of
``flower.urls.handlers`` (misses the routes Tornado adds itself, and any route a later
Flower adds), and a proxy in front (one more process to run and secure).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from typing import Any

import flower.command
import tornado.httputil
import tornado.web
from flower.app import Flower

from dagwright.settings import Settings
from dagwright.tasks.app_factory import build_app

BASIC_AUTH_ENV = "FLOWER_BASIC_AUTH"


class LoginRequired(tornado.web.RequestHandler):
    """What every request without a valid login gets: 401 and a basic-auth challenge."""

    def check_xsrf_cookie(self) -> None:
        """Skipped: a POST without a login is refused for that, not for lacking a cookie."""

    def prepare(self) -> None:
        self.set_status(401)
        self.set_header("WWW-Authenticate", 'Basic realm="flower"')
        self.finish("Access denied")


class LoginRequiredFlower(Flower):
    """Flower, answering nothing (not even ``/metrics``) without one of ``logins``."""

    logins: tuple[str, ...] = ()  # "user:password" each; set by require_login_everywhere

    def find_handler(self, request: tornado.httputil.HTTPServerRequest, **kwargs: Any) -> Any:
        if not has_login(request, self.logins):
            return self.get_handler_delegate(request, LoginRequired)
        return super().find_handler(request, **kwargs)


def has_login(request: tornado.httputil.HTTPServerRequest, logins: tuple[str, ...]) -> bool:
    """Whether the request's basic-auth credentials are one of ``logins`` (compared in
    constant time, as Flower does)."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme != "Basic":
        return False
    try:
        given = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return False
    return any(hmac.compare_digest(given.encode(), login.encode()) for login in logins)


def require_login_everywhere(basic_auth: str) -> None:
    """Make the ``flower`` command build a ``LoginRequiredFlower`` for ``basic_auth``
    (``user:password``, comma-separated for several)."""
    LoginRequiredFlower.logins = tuple(basic_auth.split(","))  # split as Flower splits it
    flower.command.Flower = LoginRequiredFlower


def flower_argv(port: int, address: str, url_prefix: str) -> list[str]:
    argv = ["flower", f"--port={port}", f"--address={address}"]
    if url_prefix.strip("/"):
        argv.append(f"--url_prefix={url_prefix.strip('/')}")
    return argv


def run_flower(
    settings: Settings,
    *,
    port: int,
    address: str,
    url_prefix: str = "",
    basic_auth: str | None,
) -> int:
    """Serve Flower until SIGTERM or Ctrl-C; returns its exit code. Flower's persistent
    mode stays off unless ``FLOWER_PERSISTENT`` says otherwise: the run state is in Redis,
    and Flower's own copy of task history would be one more thing to expire."""
    app = build_app(settings)
    if basic_auth:
        os.environ[BASIC_AUTH_ENV] = basic_auth
        require_login_everywhere(basic_auth)
    code = app.start(flower_argv(port, address, url_prefix))
    return int(code or 0)

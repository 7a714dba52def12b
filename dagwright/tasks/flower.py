"""Flower, Celery's web monitor, on dagwright's broker.

Started the way Flower documents: as the ``flower`` sub-command of Celery's command line
(``celery [celery options] flower [flower options]``), here through the app's own
``start()``, so the broker and every Celery setting come from the dagwright app. The login
travels in Flower's ``FLOWER_BASIC_AUTH`` environment variable of this process, never on
a command line that ``ps`` would show.
"""

from __future__ import annotations

import os

from dagwright.settings import Settings
from dagwright.tasks.app_factory import build_app

BASIC_AUTH_ENV = "FLOWER_BASIC_AUTH"


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
    code = app.start(flower_argv(port, address, url_prefix))
    return int(code or 0)

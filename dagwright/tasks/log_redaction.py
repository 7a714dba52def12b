"""Worker and beat logs redacted (redaction.py) as soon as Celery has set them up."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import after_setup_logger, after_setup_task_logger

from dagwright.redaction import known_secrets, redact_log_handlers
from dagwright.settings import Settings


def redact_logs_once_set_up(settings: Settings) -> None:
    """Every line the process's log handlers write is redacted, this deployment's secret
    values included. Call it before building the worker or beat: Celery sets up their
    logging as it builds them, then tells whoever listens."""
    secrets = known_secrets(settings)

    def redact_handlers(logger: logging.Logger, **_: Any) -> None:
        redact_log_handlers(logger, secrets)

    # weak=False: the receiver is this closure, which nothing else keeps alive; the uid
    # keeps a beat that starts again (after losing Redis) from connecting it twice.
    for signal in (after_setup_logger, after_setup_task_logger):
        signal.connect(redact_handlers, weak=False, dispatch_uid=f"dagwright.{signal.name}")

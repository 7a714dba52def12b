"""Worker log lines name the node attempt they were made in: ``[run=… node=…]``."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import after_setup_logger, after_setup_task_logger

from dagwright.telemetry.node_logs import tag_log_handlers


def tag_logs_once_set_up() -> None:
    """Every line the worker's log handlers write while a node attempt runs carries the
    attempt's run and node ids (telemetry/node_logs.py). Call it before building the
    worker: Celery sets up its logging as it builds it, then tells whoever listens."""

    def tag_handlers(logger: logging.Logger, **_: Any) -> None:
        tag_log_handlers(logger)

    for signal in (after_setup_logger, after_setup_task_logger):
        signal.connect(tag_handlers, weak=False, dispatch_uid=f"dagwright.ids.{signal.name}")

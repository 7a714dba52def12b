"""Errors as problem+json (RFC 9457): one shape for every error the API answers.

``{"type", "title", "status", "detail", "error"}``: ``detail`` is the very line the CLI
prints for the same error (``errors.error_line``), ``error`` its class name; for a 5xx,
the server's own failure, ``detail`` is a line that names no internal address (the CLI
line, with the Redis host and port, goes to the server's log). PlanError
and UnrunnablePlanError add ``problems`` (every problem, not only the first).

Status codes, by the error's class (the first that matches):

==========================================  ======
UnknownRunError, UnknownNodeError,           404
UnknownDeadLetterError, UnknownScheduleError,
UnknownEvalError, UnknownMemoryError
IdempotencyConflictError, ConflictError      409
(a state that forbids the action: a letter
replayed already, a node waiting for nothing)
RunError (a result asked of a failed,        409
cancelled or unfinished run)
ConfigurationError (the server's settings)   500
any other InputError, and request validation 422
BrokerUnavailableError                       503
any other error                              500 (no detail: nothing internal leaks)
==========================================  ======

422, not 400, for bad input: the request was well-formed HTTP and JSON, and what it
asked for was refused (RFC 9110 §15.5.21); FastAPI answers its own validation errors so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from dagwright.errors import (
    INTERNAL_ERROR,
    DagwrightError,
    PlanError,
    UnrunnablePlanError,
    error_line,
    public_line,
    status_of,
)
from dagwright.server.methods import allowed_methods

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"


class Problem(Exception):
    """An HTTP error answered as problem+json (raised by the API's own checks: auth,
    scopes, CSRF)."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        error: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.error = error or HTTPStatus(status).phrase.replace(" ", "")
        self.headers = headers or {}


def problem_response(
    status: int,
    detail: str,
    error: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "error": error,
        **extra,
    }
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def dagwright_problem(exc: DagwrightError) -> JSONResponse:
    """The problem response for an error the client raised, with its CLI line (a
    public line instead for the server's own failures: ``public_line``)."""
    extra: dict[str, Any] = {}
    if isinstance(exc, PlanError | UnrunnablePlanError):
        extra["problems"] = list(exc.problems)
    status = status_of(exc)
    return problem_response(status, public_line(exc, status), type(exc).__name__, **extra)


def validation_problem(exc: RequestValidationError) -> JSONResponse:
    """FastAPI's request validation, as one line naming the first field (and the rest)."""
    problems = [validation_line(error) for error in exc.errors()]
    more = len(problems) - 1
    detail = problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")
    return problem_response(422, detail, "RequestValidationError", problems=problems)


def validation_line(error: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
    return f"{where}: {error.get('msg', 'invalid')}" if where else str(error.get("msg"))


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as problem+json; never a traceback or a secret."""

    async def on_problem(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Problem)
        return problem_response(exc.status, exc.detail, exc.error, headers=exc.headers)

    async def on_dagwright(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, DagwrightError)
        response = dagwright_problem(exc)
        if response.status_code >= 500:
            log.warning("%s %s: %s", request.method, request.url.path, error_line(exc))
        return response

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return validation_problem(exc)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        error = HTTPStatus(exc.status_code).phrase.replace(" ", "")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed_methods(request)
        return problem_response(exc.status_code, str(exc.detail), error, headers=headers)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return problem_response(500, INTERNAL_ERROR, "InternalError")

    app.add_exception_handler(Problem, on_problem)
    app.add_exception_handler(DagwrightError, on_dagwright)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)

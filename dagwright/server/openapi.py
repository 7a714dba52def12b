"""What the OpenAPI document says that FastAPI cannot infer from the routes: the error
bodies, the credentials, and the headers the server sends.

- **Errors.** Every error is problem+json (``problems.py``): one schema,
  ``ProblemDetails``, declared by ``problem_responses`` for each status an operation can
  answer, in place of FastAPI's default 422 (``HTTPValidationError``, a JSON array of
  ``detail`` that the server never sends). 401 and 503 come with every operation: each
  checks its credential in Redis.
- **Credentials.** ``require(scope)`` (``auth.py``) depends on three documentation-only
  security schemes (``DocumentedScheme``: they read nothing, ``auth.py`` does):
  ``bearer``, ``basic`` (the token as password) and ``session`` (the dashboard's
  cookie), with the scope the operation needs as the requirement's role (OpenAPI 3.1).
  So Swagger UI has its Authorize button and generated clients send the token.
- **Resources.** ``documented(model, ...)`` declares a response's model
  (``server/resources.py``) beside its problems, without serializing through it: the
  routes send ``json_views``'s dicts as they are (``payloads.py``), so the document
  describes the bytes and does not change them.

Rejected: rewriting the generated document afterwards (a second description of the
routes, drifting from them), and ``response_model=`` (the views' dicts would be
validated and encoded again on every response: 8x slower for a 1,000-node run).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.models import APIKey, APIKeyIn, HTTPBase, HTTPBearer
from fastapi.openapi.models import SecurityBase as SecuritySchemeModel
from fastapi.openapi.utils import get_openapi
from fastapi.security.base import SecurityBase
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict, JsonValue

from dagwright.server.problems import PROBLEM_JSON
from dagwright.server.sessions import CSRF_HEADER, SESSION_COOKIE


class ProblemDetails(BaseModel):
    """An error (RFC 9457): ``detail`` is the line the CLI prints for it."""

    model_config = ConfigDict(json_schema_extra={"additionalProperties": True})

    type: str = Field(description='Always "about:blank": the status says what happened.')
    title: str = Field(description="The status's phrase.")
    status: int = Field(ge=400, le=599)
    detail: str = Field(description="One line a person can act on.")
    error: str = Field(description="The error's class (UnknownRunError, PlanError...).")
    problems: list[str] = Field(
        default_factory=list,
        description="Every problem of a plan or a request, when there are several.",
    )


RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer"},
    }
}
WWW_AUTHENTICATE = {
    "WWW-Authenticate": {
        "description": 'The schemes accepted: Bearer realm="dagwright", Basic realm="dagwright".',
        "schema": {"type": "string"},
    }
}
LOCATION = {"Location": {"description": "The path of what was made.", "schema": {"type": "string"}}}

PROBLEMS: dict[int, tuple[str, dict[str, Any] | None]] = {
    400: ("The body is not JSON (not UTF-8, or cut short).", None),
    401: (
        "No credential, or one that is not valid (revoked, mistyped, session ended).",
        WWW_AUTHENTICATE,
    ),
    403: (
        "The token lacks the scope; or a change by a cookie session without its "
        f"{CSRF_HEADER}, or asked by another site's page.",
        None,
    ),
    404: ("No such thing: the run, node, dead letter, schedule or eval is unknown.", None),
    409: ("Its state forbids it (see detail).", None),
    413: ("The body is over server_max_request_bytes.", None),
    422: ("The request is well-formed and its content is refused (see detail, problems).", None),
    429: ("This token has its share of event streams open.", RETRY_AFTER),
    503: (
        "The server cannot reach its Redis store, or has all its event streams open.",
        RETRY_AFTER,
    ),
}
ALWAYS = (401, 503)  # every operation checks its credential in Redis


def problem_responses(*statuses: int, conflict: str = "") -> dict[int | str, dict[str, Any]]:
    """The problem+json responses of an operation: ``statuses`` and 401 and 503."""
    responses: dict[int | str, dict[str, Any]] = {}
    for status in sorted({*statuses, *ALWAYS}):
        description, headers = PROBLEMS[status]
        if status == 409 and conflict:
            description = conflict
        response: dict[str, Any] = {
            "description": description,
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}},
        }
        if status == 503 and 429 in statuses:  # the event stream's limit
            headers = RETRY_AFTER
        if headers:
            response["headers"] = headers
        responses[status] = response
    return responses


def exactly_one(first: str, second: str) -> JsonDict:
    """A JSON Schema that holds when exactly one of two fields is given (and not null):
    a rule of a request body that its fields' own schemas cannot state. Written with
    ``not`` and ``if``/``then``, which generators of clients pass over, rather than a
    ``oneOf`` they would turn into two request types."""
    return {
        "not": {"allOf": [given(first), given(second)]},
        "if": {"not": given(first)},
        "then": given(second),
    }


def given(name: str) -> JsonValue:
    return {"required": [name], "not": {"properties": {name: {"type": "null"}}}}


def documented(
    model: Any,
    *statuses: int,
    status: int = 200,
    description: str = "",
    headers: dict[str, Any] | None = None,
    conflict: str = "",
) -> dict[int | str, dict[str, Any]]:
    """An operation's responses: ``model`` for ``status`` (documented only: the route
    sends its view's dict as it is), and the problems of ``statuses``."""
    answer: dict[str, Any] = {"model": model, "description": description or "Success."}
    if headers:
        answer["headers"] = headers
    return {status: answer, **problem_responses(*statuses, conflict=conflict)}


class DocumentedScheme(SecurityBase):
    """A security scheme in the document only: ``auth.py`` reads the credentials (the
    first present wins), this says which ones exist."""

    def __init__(self, model: SecuritySchemeModel, scheme_name: str) -> None:
        self.model = model
        self.scheme_name = scheme_name

    async def __call__(self) -> None:
        return None


BEARER = DocumentedScheme(
    HTTPBearer(bearerFormat="dw_ token", description="An API token (`dagwright token create`)."),
    "bearer",
)
BASIC = DocumentedScheme(
    HTTPBase(scheme="basic", description="Any user name, the API token as password."),
    "basic",
)
SESSION = DocumentedScheme(
    APIKey(
        **{"in": APIKeyIn.cookie},
        name=SESSION_COOKIE,
        description=f"The dashboard's session; a change also sends {CSRF_HEADER}.",
    ),
    "session",
)
SCHEMES = (BEARER, BASIC, SESSION)


def api_document(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document (made once), with ``ProblemDetails`` among its schemas:
    the problem responses refer to it under ``application/problem+json``, a media type
    FastAPI's ``responses={..: {"model": ..}}`` cannot name."""
    if app.openapi_schema is None:
        document = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            description=app.description,
            routes=app.routes,
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        schemas["ProblemDetails"] = ProblemDetails.model_json_schema()
        for operation in operations(document):
            replace_default_422(operation)
            for parameter in operation.get("parameters", []):
                parameter["schema"] = without_null(parameter["schema"])
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        app.openapi_schema = document
    return app.openapi_schema


def operations(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [operation for path in document["paths"].values() for operation in path.values()]


def replace_default_422(operation: dict[str, Any]) -> None:
    """FastAPI's own 422 (an operation that declared none) as it is served: problem+json,
    or none at all where nothing can fail validation (a path's string parameters)."""
    response = operation["responses"].get("422", {})
    if "HTTPValidationError" not in str(response):
        return
    parameters = operation.get("parameters", [])
    if "requestBody" in operation or any(p["in"] != "path" for p in parameters):
        operation["responses"]["422"] = problem_responses(422)[422]
    else:
        del operation["responses"]["422"]


def without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without the ``null`` FastAPI adds for an optional one: a
    query string or header holds text, and an absent parameter is left out, not null."""
    branches = [branch for branch in schema.get("anyOf", []) if branch != {"type": "null"}]
    if len(branches) != 1:
        return schema
    rest = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**branches[0], **rest}

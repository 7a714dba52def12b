"""Rendering the dashboard's pages: one Jinja2 environment (autoescape on: goals, outputs
and node ids are untrusted text) and the security headers every page and asset carries.

The pages are shells: the data comes from ``/api/v1`` through the JavaScript modules under
``static/js``, which insert text as text nodes, never as HTML. So the Content-Security-Policy
allows no inline script and no inline style attribute at all.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

import dagwright

HERE = Path(__file__).parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def static_url(path: str) -> str:
    """An asset's URL, versioned so that an upgrade is not served from a stale cache."""
    return f"/static/{path}?v={dagwright.__version__}"


@cache
def environment() -> Environment:
    """The templates' environment, built once per process."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["static"] = static_url
    return env


def render(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page: the template filled with ``context``, with the security headers."""
    html = environment().get_template(template).render(**context)
    response = HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)
    response.headers["Cache-Control"] = "no-store"  # pages may name the visitor
    return response

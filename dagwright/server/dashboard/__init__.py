"""The web dashboard: HTML pages served by ``dagwright server`` (no Node build step).

Pages (``pages.py``) are Jinja2 shells; the data comes from ``/api/v1`` through small
vanilla JavaScript modules (``static/js``); the run page lays its DAG out with the
vendored dagre (``static/vendor/dagre``). ``login.py`` turns a token into a session cookie.

Rejected: a single-page app with a bundler (a Node build step for every contributor and
release), and server-rendered data tables (a second reading of the run state beside the
API's; the pages would drift from what ``/api/v1`` says).
"""

from __future__ import annotations

from fastapi import APIRouter

from dagwright.server.dashboard.assets import assets_router
from dagwright.server.dashboard.login import login_router
from dagwright.server.dashboard.pages import pages_router


def dashboard_router() -> APIRouter:
    """The dashboard's pages, its login and logout, and its static files."""
    router = APIRouter(include_in_schema=False)
    router.include_router(assets_router())
    router.include_router(login_router())
    router.include_router(pages_router())
    return router

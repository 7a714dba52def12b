"""The web dashboard: HTML pages served by ``dagwright server`` (no Node build step)."""

from __future__ import annotations

from fastapi import APIRouter


def dashboard_router() -> APIRouter:
    """The dashboard's pages (filled in by the dashboard work; empty until then)."""
    return APIRouter()

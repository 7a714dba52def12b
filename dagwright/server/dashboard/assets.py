"""The dashboard's static files (CSS, JavaScript modules, the vendored dagre) under
``/static/``.

A plain route rather than a mounted ``StaticFiles`` app: an ``APIRouter`` carries routes,
not mounts, into the application that includes it, and this way the files get the same
security headers as the pages. Paths are resolved and must stay inside the static folder.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

from dagwright.server.dashboard.rendering import SECURITY_HEADERS, STATIC_DIR

MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",  # module scripts need a JavaScript type
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def asset_path(relative: str) -> Path | None:
    """The file under the static folder that ``relative`` names, or None (outside it,
    missing, or a kind of file the dashboard does not serve)."""
    root = STATIC_DIR.resolve()
    candidate = (root / relative).resolve()
    if not candidate.is_relative_to(root) or not candidate.is_file():
        return None
    return candidate if candidate.suffix in MEDIA_TYPES else None


def assets_router() -> APIRouter:
    router = APIRouter()

    @router.get("/static/{relative:path}", include_in_schema=False)
    def static_file(relative: str) -> FileResponse:
        path = asset_path(relative)
        if path is None:
            raise HTTPException(status_code=404, detail="no such file")
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
        return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=headers)

    return router

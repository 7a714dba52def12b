"""``/api/v1/memory``: list and show with the read scope, import and remove with admin
only, problems for what is unknown or refused; the served shapes are the documented
ones."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from tests.support.api_server import ApiServer

pytestmark = pytest.mark.usefixtures("worker")

EXPORT = {"format": "dagwright.memory/1", "namespace": "x", "files": {"/memories/a.md": "alpha"}}


def schema_of(api: ApiServer, method: str, path: str) -> dict[str, object]:
    with api.http("read") as http:
        doc = http.get("/api/v1/openapi.json").json()
    content = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]
    return {**content["schema"], "components": doc["components"]}


def test_memory_is_read_with_read_and_changed_with_admin(api: ApiServer) -> None:
    with api.http("operate") as operate:
        assert operate.put("/api/v1/memory/team", json=EXPORT).status_code == 403
    with api.http("admin") as admin:
        imported = admin.put("/api/v1/memory/team", json=EXPORT)
        assert imported.status_code == 200 and imported.json() == {"namespace": "team", "files": 1}
    with api.http("read") as read:
        listed = read.get("/api/v1/memory").json()
        shown = read.get("/api/v1/memory/team").json()
        assert read.delete("/api/v1/memory/team").status_code == 403
        missing = read.get("/api/v1/memory/nobody")
    assert [entry["name"] for entry in listed] == ["team"]
    assert shown == {**EXPORT, "namespace": "team"}
    Draft202012Validator(schema_of(api, "get", "/api/v1/memory")).validate(listed)
    Draft202012Validator(schema_of(api, "get", "/api/v1/memory/{namespace}")).validate(shown)
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")
    with api.http("admin") as admin:
        escape = {**EXPORT, "files": {"/memories/../x": "y"}}
        refused = admin.put("/api/v1/memory/team", json=escape)
        assert refused.status_code == 422 and "files./memories/../x" in refused.json()["detail"]
        assert admin.delete("/api/v1/memory/team").status_code == 200
        assert admin.get("/api/v1/memory").json() == []

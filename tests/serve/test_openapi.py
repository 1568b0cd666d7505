"""The OpenAPI document matches the app: every route, method and answer it gives."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("starlette")

from jsonschema import Draft202012Validator
from starlette.routing import Route
from starlette.testclient import TestClient

from actors.serve import create_app
from actors.store import MemoryStore

from .agents import make_agent


def documented(doc: dict[str, Any], path: str, method: str, status: int) -> dict[str, Any]:
    operation = doc["paths"][path][method.lower()]
    assert str(status) in operation["responses"], f"{method} {path} does not document {status}"
    response: dict[str, Any] = operation["responses"][str(status)]
    return response


def check(doc: dict[str, Any], path: str, response: Any) -> None:
    """The response's status is documented for the route, and its JSON fits the schema."""
    method = response.request.method
    spec = documented(doc, path, method, response.status_code)
    if response.status_code == 204:
        return
    schema = spec["content"]["application/json"]["schema"]
    Draft202012Validator({**schema, "components": doc["components"]}).validate(response.json())


def test_every_route_is_documented_and_every_documented_route_exists() -> None:
    app = create_app(make_agent(), MemoryStore())
    with TestClient(app) as client:
        doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    served = {
        (route.path, method.lower())
        for route in app.routes
        if isinstance(route, Route) and route.methods
        for method in route.methods - {"HEAD"}
        if route.path not in ("/", "/static/{name}", "/openapi.json")
    }
    described = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert served == described


def test_the_answers_match_their_documented_schemas() -> None:
    app = create_app(make_agent(), MemoryStore(), max_body=2000)
    with TestClient(app) as client:
        doc = client.get("/openapi.json").json()
        check(doc, "/agent", client.get("/agent"))
        check(doc, "/healthz", client.get("/healthz"))
        check(doc, "/sessions", client.post("/sessions", json={"session_id": "s"}))
        check(doc, "/sessions", client.post("/sessions", json={"session_id": "s"}))  # 409
        check(doc, "/sessions", client.get("/sessions"))
        check(doc, "/sessions", client.get("/sessions?limit=0"))  # 400
        one = "/sessions/{session_id}"
        check(doc, one, client.get("/sessions/s"))
        check(doc, one, client.get("/sessions/none"))  # 404
        runs = "/sessions/{session_id}/runs"
        check(doc, runs, client.post("/sessions/s/runs", json={"prompt": "approve"}))
        check(doc, runs, client.post("/sessions/s/runs", content=b"{"))  # 400
        check(doc, runs, client.post("/sessions/s/runs", json={"prompt": "x" * 3000}))  # 413
        requests = client.get("/sessions/s/requests")
        check(doc, "/sessions/{session_id}/requests", requests)
        request_id = requests.json()["requests"][0]["id"]
        answers = "/sessions/{session_id}/answers"
        body = {"answers": {request_id: {"ok": True}}}
        check(doc, answers, client.post("/sessions/s/answers", json=body))
        check(doc, answers, client.post("/sessions/s/answers", json=body))  # 409
        check(doc, "/sessions/{session_id}/tree", client.get("/sessions/s/tree"))
        check(doc, "/sessions/{session_id}/usage", client.get("/sessions/s/usage"))
        check(doc, "/sessions/{session_id}/transcript", client.get("/sessions/s/transcript"))
        steer = client.post("/sessions/s/steer", json={"message": "hi"})
        check(doc, "/sessions/{session_id}/steer", steer)
        check(doc, "/sessions/{session_id}/cancel", client.post("/sessions/s/cancel"))
        check(doc, one, client.delete("/sessions/s"))


def test_import_actors_does_not_import_starlette_and_a_missing_one_names_the_extra() -> None:
    code = (
        "import sys; import actors\n"
        "assert 'starlette' not in sys.modules and 'uvicorn' not in sys.modules\n"
        "sys.modules['starlette'] = None\n"
        "import importlib.util\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'starlette' else 1\n"
        "try:\n"
        "    import actors.serve\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert "pip install 'actors[serve]'" in done.stdout

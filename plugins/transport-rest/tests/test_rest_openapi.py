"""``/openapi.json`` and ``/docs`` describe the real routes, per mode and auth setting."""

from __future__ import annotations

from typing import Any

from rest_support import Serve

SID = "OpenEnv-Session-Id"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = doc
    for part in ref[2:].split("/"):
        node = node[part]
    return node


async def test_openapi_document_is_valid_and_truthful(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        r = await c.get("/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    assert {"title", "version"} <= set(doc["info"])
    for ref in _refs(doc):  # every $ref points inside the document
        assert isinstance(_resolve(doc, ref), dict), ref
    paths = doc["paths"]
    assert {"/reset", "/step", "/state", "/sessions", "/sessions/{session_id}", "/health"} <= set(paths)
    for path, ops in paths.items():
        for method, op in ops.items():
            assert method in {"get", "post", "delete"}, (path, method)
            assert op["responses"], (path, method)

    reset = paths["/reset"]["post"]
    [header] = [p for p in reset["parameters"] if p["in"] == "header"]
    assert header["name"] == SID and header["required"] is False
    assert "one-shot" in header["description"] and "OpenEnv-Session: none" in header["description"]
    assert {"200", "404", "422", "500", "503"} <= set(reset["responses"])
    assert "OpenEnv-Session" in reset["responses"]["200"]["headers"]
    assert paths["/sessions"]["post"]["responses"].keys() >= {"201", "503"}

    # the step body's action is the env's own action schema
    step_body = _resolve(doc, paths["/step"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"])
    action = _resolve(doc, step_body["properties"]["action"]["$ref"])
    assert action["properties"]["message"]["minLength"] == 1
    assert action["additionalProperties"] is False
    assert step_body["required"] == ["action"]
    reset_body = _resolve(doc, reset["requestBody"]["content"]["application/json"]["schema"]["$ref"])
    seed = reset_body["properties"]["seed"]
    assert {"type": "integer", "minimum": 0} in seed["anyOf"]
    assert "security" not in doc


async def test_openapi_follows_mode_and_auth(serve: Serve) -> None:
    srv = await serve(mode="production", token="s3cret")
    async with srv.client(headers={"Authorization": "Bearer s3cret"}) as c:
        doc = (await c.get("/openapi.json")).json()
        page = await c.get("/docs")
    # Production keeps the routes for held sessions; the description says the one-shot form is refused.
    assert "MODE_ERROR" in doc["paths"]["/step"]["post"]["description"]
    assert "/sessions" in doc["paths"]
    assert doc["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert doc["paths"]["/health"]["get"]["security"] == []
    assert "401" in doc["paths"]["/sessions"]["post"]["responses"]
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'href="openapi.json"' in page.text and "/sessions/{session_id}" in page.text


async def test_docs_page_lists_control_routes(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        page = await c.get("/docs")
    assert page.status_code == 200
    for path in ("/reset", "/step", "/state", "/sessions"):
        assert f"<code>{path}</code>" in page.text
    assert "<script" not in page.text  # self-contained: no CDN assets

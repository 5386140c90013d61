"""A local HTTP server answering the Hugging Face Hub calls ``create_repo`` and ``upload_folder``
make (repo creation, README front-matter validation, pre-upload, commit), and those of
``openenv fork`` (``whoami``, ``repo_exists`` of a Space, ``duplicate_space``/``duplicate_repo``),
recording every request. Binds 127.0.0.1 only.

It is the HTTP boundary of ``openenv push --hf-space``: what huggingface_hub sends is real; what
the Hub would do with it (build the Space) is not reproduced.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeHub"]


class FakeHub:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.repos: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.validated: list[Any] = []
        self.commits: list[str] = []
        #: Spaces that exist (``owner/name``); a duplicate adds its target.
        self.spaces: set[str] = set()
        #: ``(source, payload)`` of each duplicate request.
        self.duplicated: list[tuple[str, dict[str, Any]]] = []
        self.user = "alice"
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, code: int, doc: Any, headers: dict[str, str] | None = None) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                hub.requests.append(("GET", self.path))
                path = self.path.split("?")[0]
                if path == "/api/whoami-v2":
                    self._reply(200, {"type": "user", "name": hub.user})
                elif path.startswith("/api/spaces/"):
                    repo = "/".join(path.removeprefix("/api/spaces/").split("/")[:2])
                    if repo in hub.spaces:
                        self._reply(200, {"id": repo, "sha": "0" * 40, "private": False, "siblings": []})
                    else:  # the Hub's answer for a missing repo: huggingface_hub maps the header
                        self._reply(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
                else:
                    self._reply(404, {"error": f"not answered by the fake hub: GET {self.path}"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                hub.requests.append(("POST", self.path))
                path = self.path.split("?")[0]
                if path.startswith("/api/spaces/") and path.endswith("/duplicate"):
                    source = path.removeprefix("/api/spaces/").removesuffix("/duplicate")
                    doc = json.loads(raw)
                    hub.duplicated.append((source, doc))
                    if doc["repository"] in hub.spaces:
                        self._reply(409, {"error": "You already created this space repo"})
                    else:
                        hub.spaces.add(doc["repository"])
                        self._reply(200, {"url": f"http://{self.headers['Host']}/spaces/{doc['repository']}"})
                elif path == "/api/repos/create":
                    doc = json.loads(raw)
                    hub.repos.append(doc)
                    repo = f"{doc.get('organization') or ''}/{doc['name']}".lstrip("/")
                    self._reply(200, {"url": f"http://{self.headers['Host']}/spaces/{repo}", "name": repo})
                elif path == "/api/validate-yaml":
                    hub.validated.append(json.loads(raw))
                    self._reply(200, {"errors": [], "warnings": []})
                elif "/preupload/" in path:
                    files = json.loads(raw)["files"]
                    self._reply(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                for f in files]})
                elif "/commit/" in path:
                    for line in raw.decode().splitlines():
                        item = json.loads(line)
                        if item.get("key") == "file":
                            value = item["value"]
                            hub.files[value["path"]] = base64.b64decode(value["content"])
                    repo = path.split("/commit/")[0].removeprefix("/api/spaces/")
                    hub.commits.append(repo)
                    self._reply(200, {"commitUrl": f"http://{self.headers['Host']}/spaces/{repo}/commit/{'0' * 40}",
                                      "commitOid": "0" * 40,
                                      "pullRequestUrl": None})
                else:
                    self._reply(404, {"error": f"not answered by the fake hub: POST {path}"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

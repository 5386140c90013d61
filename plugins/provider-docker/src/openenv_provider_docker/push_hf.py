"""``openenv push --hf-space``: stage an env package as a Docker Space and upload it.

The staged folder is what is sent, byte for byte: the package's files (minus virtualenvs, caches,
build output and VCS folders), a ``Dockerfile`` when the package has none (it installs the
package and serves it on port 8000), and a README that starts with the Space front matter
(``sdk: docker``, ``app_port: 8000``) when the package's has none.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SpacePlan", "plan_space", "upload_space"]

_SPACE = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*\Z")
_SKIP_DIRS = {".venv", "venv", "__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache", "dist",
              "build", ".tox", ".nox"}
_PORT = 8000

_DOCKERFILE = f"""\
# Written by `openenv push --hf-space`: installs this package and serves it on port {_PORT}.
FROM python:3.11-slim
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir /app openenvkit-transport-ws
EXPOSE {_PORT}
CMD ["python", "-m", "openenv", "serve", "{{env}}", "--host", "0.0.0.0", "--port", "{_PORT}", "--allow-open"]
"""


@dataclass
class SpacePlan:
    repo_id: str
    source: Path
    env: str
    private: bool
    files: dict[str, bytes] = field(default_factory=dict)  # path in the Space -> content

    def to_json(self) -> dict[str, Any]:
        return {"hf_space": self.repo_id, "repo_type": "space", "space_sdk": "docker", "private": self.private,
                "env": self.env, "source": str(self.source),
                "files": [{"path": p, "bytes": len(b)} for p, b in sorted(self.files.items())]}


def _package_files(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in _SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts) or not path.is_file():
            continue
        if path.suffix in {".pyc", ".pyo"}:
            continue
        files[rel.as_posix()] = path.read_bytes()
    return files


def _env_name(root: Path) -> str:
    from openenv.manifest import ManifestError, load_manifest

    found = [root / "openenv.yaml", *sorted(root.glob("src/*/openenv.yaml"))]
    for manifest in found:
        if manifest.is_file():
            try:
                return load_manifest(manifest).name
            except ManifestError as exc:
                raise ValueError(str(exc)) from None
    raise ValueError(f"no openenv.yaml in {root} (root or src/*/): the Space would not know which env to serve. "
                     "Run `openenv validate` on the folder first.")


def plan_space(root: Path, repo_id: str, *, private: bool = False) -> SpacePlan:
    """Everything that would be uploaded for ``root`` to the Space ``repo_id``."""
    if not _SPACE.match(repo_id):
        raise ValueError(f"--hf-space {repo_id!r}: expected USER/NAME, e.g. alice/my-env.")
    if not (root / "pyproject.toml").is_file():
        raise ValueError(f"{root} has no pyproject.toml: pass the folder of an env package (see `openenv init`).")
    env = _env_name(root)
    files = _package_files(root)
    if "Dockerfile" not in files:
        files["Dockerfile"] = _DOCKERFILE.replace("{env}", env).encode()
    readme = files.get("README.md", b"").decode("utf-8", errors="replace")
    if not readme.startswith("---\n"):
        header = (f"---\ntitle: {env}\nsdk: docker\napp_port: {_PORT}\ntags: [openenv]\n---\n\n")
        files["README.md"] = (header + readme).encode()
    return SpacePlan(repo_id=repo_id, source=root.resolve(), env=env, private=private, files=files)


def upload_space(plan: SpacePlan) -> str:
    """Create the Space (if needed) and upload the staged files; return the Space's URL."""
    from huggingface_hub import HfApi

    api = HfApi()
    url = api.create_repo(plan.repo_id, repo_type="space", space_sdk="docker", private=plan.private,
                          exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="openenv-space-"))
    try:
        for rel, content in plan.files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        api.upload_folder(folder_path=str(staging), repo_id=plan.repo_id, repo_type="space",
                          commit_message=f"openenv push: {plan.env}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(url)

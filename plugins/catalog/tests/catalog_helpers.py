"""Helpers of the catalog plugin's tests (a module name of its own: test folders share sys.path)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import jsonschema

from openenv_catalog.catalog import catalog_schema

__all__ = ["OCI_INDEX", "OCI_MANIFEST", "blob_ok", "check_catalog", "digest", "get_manifest", "git", "push_blob",
           "push_image"]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def check_catalog(path: Path) -> dict[str, Any]:
    """Every catalog a test writes is checked here against the shipped JSON Schema, on its own."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(catalog_schema()).validate(doc)
    return doc


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push_blob(host: str, repo: str, data: bytes) -> dict[str, object]:
    started = httpx.post(f"http://{host}/v2/{repo}/blobs/uploads/")
    assert started.status_code == 202, started.text
    location = started.headers["location"]
    location = location if location.startswith("http") else f"http://{host}{location}"
    sep = "&" if "?" in location else "?"
    done = httpx.put(f"{location}{sep}digest={digest(data)}", content=data,
                     headers={"Content-Type": "application/octet-stream"})
    assert done.status_code == 201, done.text
    return {"mediaType": "application/octet-stream", "digest": digest(data), "size": len(data)}


def push_image(host: str, repo: str, tag: str, layer: bytes) -> bytes:
    """A real OCI image manifest (config + one layer) pushed through the registry API."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}})
    config_desc = push_blob(host, repo, config.encode())
    config_desc["mediaType"] = "application/vnd.oci.image.config.v1+json"
    layer_desc = push_blob(host, repo, layer)
    layer_desc["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config_desc,
                           "layers": [layer_desc]}).encode()
    done = httpx.put(f"http://{host}/v2/{repo}/manifests/{tag}", content=manifest,
                     headers={"Content-Type": OCI_MANIFEST})
    assert done.status_code == 201, done.text
    return manifest


def get_manifest(host: str, repo: str, ref: str) -> httpx.Response:
    return httpx.get(f"http://{host}/v2/{repo}/manifests/{ref}",
                     headers={"Accept": f"{OCI_INDEX}, {OCI_MANIFEST}"})


def blob_ok(host: str, repo: str, digest: str) -> bool:
    return httpx.head(f"http://{host}/v2/{repo}/blobs/{digest}").status_code == 200

"""``openenv fork IMAGE DEST`` against real local OCI registries (Debian's ``docker-registry``, as
the push tests of tests/author use it; .ci/registry-setup.sh installs it): within one registry
(blobs mounted) and between two (blobs copied), an image index with its children, a DEST that
exists refused, and nothing tagged after a failure."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from catalog_helpers import OCI_INDEX, OCI_MANIFEST, blob_ok, digest, get_manifest, push_image
from typer.testing import Result


def test_fork_copies_between_registries_and_mounts_within_one(registries: tuple[str, str],
                                                              openenv: Callable[..., Result]) -> None:
    a, b = registries
    layer = os.urandom(300_000)
    manifest = push_image(a, "team/echo", "v1", layer)
    across = openenv("fork", f"{a}/team/echo:v1", f"{b}/mine/echo:v1")
    assert across.exit_code == 0, across.output
    assert "2 blobs copied" in across.stdout
    got = get_manifest(b, "mine/echo", "v1")
    assert got.status_code == 200 and got.content == manifest  # byte for byte: the digest is the same
    assert blob_ok(b, "mine/echo", digest(layer))
    assert httpx.get(f"http://{b}/v2/mine/echo/blobs/{digest(layer)}", follow_redirects=True).content == layer

    within = openenv("fork", f"{a}/team/echo:v1", f"{a}/other/echo:latest")
    assert within.exit_code == 0, within.output
    assert "0 blobs copied, 2 already there or mounted" in within.stdout
    assert get_manifest(a, "other/echo", "latest").content == manifest


def test_fork_copies_an_index_with_every_child(registries: tuple[str, str], openenv: Callable[..., Result]) -> None:
    a, b = registries
    amd = push_image(a, "multi", "amd", b"amd64 layer")
    arm = push_image(a, "multi", "arm", b"arm64 layer")
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": digest(amd), "size": len(amd),
         "platform": {"architecture": "amd64", "os": "linux"}},
        {"mediaType": OCI_MANIFEST, "digest": digest(arm), "size": len(arm),
         "platform": {"architecture": "arm64", "os": "linux"}}]}).encode()
    assert httpx.put(f"http://{a}/v2/multi/manifests/v2", content=index,
                     headers={"Content-Type": OCI_INDEX}).status_code == 201
    result = openenv("fork", f"{a}/multi:v2", f"{b}/copy:v2")
    assert result.exit_code == 0, result.output
    assert get_manifest(b, "copy", "v2").content == index
    for child, layer in ((amd, b"amd64 layer"), (arm, b"arm64 layer")):
        assert get_manifest(b, "copy", digest(child)).content == child
        assert blob_ok(b, "copy", digest(layer))


def test_an_existing_dest_and_a_missing_source_are_refused(registries: tuple[str, str],
                                                           openenv: Callable[..., Result]) -> None:
    a, b = registries
    first = push_image(a, "echo", "v1", b"one")
    push_image(b, "echo", "v1", b"two")
    refused = openenv("fork", f"{a}/echo:v1", f"{b}/echo:v1")
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (f"error: {b}/echo:v1 exists: `openenv fork` never overwrites; give DEST "
                                      "another tag or repository.")
    assert get_manifest(b, "echo", "v1").content != first  # untouched
    missing = openenv("fork", f"{a}/echo:nope", f"{b}/echo:v9")
    assert missing.exit_code == 2 and "does not exist: check SOURCE" in missing.stderr
    assert get_manifest(b, "echo", "v9").status_code == 404


def test_a_failure_part_way_tags_nothing(registries: tuple[str, str], openenv: Callable[..., Result],
                                         tmp_path: Path) -> None:
    a, b = registries
    layer = b"layer that will vanish"
    push_image(a, "echo", "v1", layer)
    # Delete the layer blob from the source registry: the manifest still names it, so the copy fails
    # at that blob, after the config blob went over but before any DEST manifest is written.
    assert httpx.delete(f"http://{a}/v2/echo/blobs/{digest(layer)}").status_code == 202
    result = openenv("fork", f"{a}/echo:v1", f"{b}/echo:v1")
    assert result.exit_code == 1, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "reading blob" in result.stderr
    assert get_manifest(b, "echo", "v1").status_code == 404


@pytest.mark.parametrize(("args", "expected"), [
    (["127.0.0.1:5000/echo:v1"], "DEST is required for an image: e.g. `openenv fork 127.0.0.1:5000/echo:v1 "
                                 "127.0.0.1:5000/echo-fork:v1`."),
    (["127.0.0.1:5000/echo:v1", "owner/space"], "DEST 'owner/space' is not an image reference"),
    (["127.0.0.1:5000/Echo:v1", "127.0.0.1:5000/b:v1"], "repository 'Echo' is not valid"),
    (["127.0.0.1:5000/echo:v1", "127.0.0.1:5000/b:v1", "--private"], "apply to Spaces, not images"),
    (["not a thing", "x/y"], "SOURCE 'not a thing' is neither a Space"),
    (["127.0.0.1:9/echo:v1", "127.0.0.1:9/b:v1"], "registry unreachable"),
    (["owner/space", "a/b", "--repo-id", "c/d"], "DEST 'a/b' and --repo-id 'c/d' differ"),
])
def test_bad_arguments_are_one_line(openenv: Callable[..., Result], args: list[str], expected: str) -> None:
    result = openenv("fork", *args)
    assert result.exit_code in (1, 2), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr

"""``openenv fork SOURCE DEST``: copy a published env under a new name (docs/catalog.md).

* A Hugging Face Space (``owner/space``, ``hf://spaces/owner/space`` or its https URL) is duplicated
  by the Hub through ``huggingface_hub`` (``duplicate_space``; ``duplicate_repo`` in releases that
  renamed it), with upstream's ``--private``, ``--set-env``, ``--set-secret`` and ``--hardware``.
  The Hub reads the token as ``huggingface_hub`` always does (``HF_TOKEN``, ``hf auth login``).
* An OCI image (``HOST[:PORT]/REPO[:TAG|@DIGEST]``, the registry named explicitly) is copied with the
  registry HTTP API: every manifest of an index and every blob, mounted across repositories when
  both are on one registry, else downloaded (digest checked) and uploaded. Loopback registries
  are reached over http, every other over https; anonymous access only.

DEST is never overwritten: a DEST that exists is refused with the way out.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from openenv.cli.output import EXIT_ERROR, EXIT_USAGE, fail

if TYPE_CHECKING:
    import httpx

__all__ = ["ForkError", "ImageRef", "copy_image", "fork", "parse_image", "space_id"]

_MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_INDEX_TYPES = {_MANIFEST_TYPES[0], _MANIFEST_TYPES[2]}
_TIMEOUT_S = 60.0
_MAX_MANIFEST_BYTES = 4 * 1024 * 1024
_MAX_INDEX_DEPTH = 2  # an index of manifests; registries do not nest deeper
_CHUNK = 1024 * 1024
_LOOPBACK = {"localhost", "127.0.0.1", "[::1]"}
_REPO = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_SPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ForkError(Exception):
    """A fork cannot be done; the message says why and what to do. ``code``: the exit code
    (``EXIT_USAGE`` for bad input such as a DEST that exists, else ``EXIT_ERROR``)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ImageRef:
    """``host/repository`` and a tag or a digest (``reference``)."""

    host: str
    repository: str
    reference: str

    @property
    def base(self) -> str:
        scheme = "http" if self.host.rsplit(":", 1)[0] in _LOOPBACK or self.host.startswith("[::1]") else "https"
        return f"{scheme}://{self.host}/v2/{self.repository}"

    def __str__(self) -> str:
        sep = "@" if self.reference.startswith("sha256:") else ":"
        return f"{self.host}/{self.repository}{sep}{self.reference}"


def _is_registry(first: str) -> bool:
    # Docker's rule: a first component with a dot or a port, or "localhost", names a registry.
    return "." in first or ":" in first or first == "localhost"


def parse_image(text: str) -> ImageRef | None:
    """``ImageRef`` of ``text`` when it names a registry explicitly, else ``None``; a malformed one
    raises ``ForkError``."""
    first, sep, rest = text.partition("/")
    if "://" in text or not sep or not _is_registry(first):  # a URL (hf://, https://) names a Space
        return None
    if "@" in rest:
        repository, _, reference = rest.partition("@")
        if not _DIGEST.match(reference):
            raise ForkError(f"{text}: the digest must be sha256:<64 hex digits>.", EXIT_USAGE)
    else:
        head, colon, tag = rest.rpartition(":")
        repository, reference = (head, tag) if colon and "/" not in tag else (rest, "latest")
        if not _TAG.match(reference):
            raise ForkError(f"{text}: tag {reference!r} is not valid (letters, digits, '_', '.', '-'; at most 128).",
                            EXIT_USAGE)
    if not _REPO.match(repository):
        raise ForkError(f"{text}: repository {repository!r} is not valid: lowercase letters, digits and "
                        "separators, e.g. 127.0.0.1:5000/team/echo-env:v1.", EXIT_USAGE)
    return ImageRef(first, repository, reference)


def space_id(text: str) -> str | None:
    """``owner/name`` of a Space written as ``owner/name``, ``hf://spaces/owner/name`` or its URL."""
    for prefix in ("hf://spaces/", "https://huggingface.co/spaces/"):
        if text.startswith(prefix):
            text = text.removeprefix(prefix).rstrip("/")
            break
    return text if _SPACE.match(text) else None


# -- OCI ------------------------------------------------------------------------------------------


def _check(reply: httpx.Response, what: str) -> None:
    if reply.status_code == 401:
        challenge = reply.headers.get("www-authenticate", "")
        raise ForkError(f"{what}: the registry asks for credentials ({challenge or 'HTTP 401'}); `openenv fork` "
                        "copies between registries that allow anonymous access: copy this one with "
                        "`skopeo copy` or `crane copy`.")
    if reply.status_code >= 400:
        reply.read()  # a streamed reply's error body is not read yet
        raise ForkError(f"{what}: HTTP {reply.status_code}: {' '.join(reply.text[:300].split())}")


def _get_manifest(client: httpx.Client, ref: ImageRef, reference: str) -> tuple[bytes, str]:
    reply = client.get(f"{ref.base}/manifests/{reference}", headers={"Accept": ", ".join(_MANIFEST_TYPES)})
    if reply.status_code == 404:
        raise ForkError(f"{ref.host}/{ref.repository}:{reference} does not exist: check SOURCE "
                        f"(`curl {ref.base}/tags/list` lists its tags).", EXIT_USAGE)
    _check(reply, f"reading manifest {reference} of {ref.host}/{ref.repository}")
    body = reply.content
    if len(body) > _MAX_MANIFEST_BYTES:
        raise ForkError(f"manifest {reference} of {ref.repository} is over {_MAX_MANIFEST_BYTES} bytes.")
    media_type = reply.headers.get("content-type", "").split(";")[0].strip()
    if media_type not in _MANIFEST_TYPES:
        media_type = json.loads(body).get("mediaType") or ""
    if media_type not in _MANIFEST_TYPES:
        raise ForkError(f"{ref}: manifest type {media_type or 'unknown'!r} is not an OCI or Docker v2 image; "
                        "`openenv fork` copies images only.")
    return body, media_type


def _digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _copy_blob(client: httpx.Client, src: ImageRef, dst: ImageRef, digest: str) -> bool:
    """Copy one blob; ``True`` when bytes were transferred (not already there, not mounted)."""
    if not _DIGEST.match(digest):
        raise ForkError(f"{src}: blob digest {digest!r} is not sha256; only sha256 content is copied.")
    if client.head(f"{dst.base}/blobs/{digest}").status_code == 200:
        return False
    if src.host == dst.host:
        mounted = client.post(f"{dst.base}/blobs/uploads/", params={"mount": digest, "from": src.repository})
        if mounted.status_code == 201:
            return False
        _check(mounted, f"mounting {digest[:19]} into {dst.repository}")
        location = mounted.headers["location"]  # 202: the registry started a plain upload instead
    else:
        started = client.post(f"{dst.base}/blobs/uploads/")
        _check(started, f"starting an upload to {dst.host}/{dst.repository}")
        location = started.headers["location"]
    if location.startswith("/"):
        location = dst.base.split("/v2/")[0] + location
    # Spool to disk (layers can be gigabytes) and check the digest before anything is uploaded.
    with tempfile.TemporaryFile() as spool, client.stream("GET", f"{src.base}/blobs/{digest}") as reply:
        _check(reply, f"reading blob {digest[:19]} of {src.repository}")
        hasher = hashlib.sha256()
        size = 0
        for chunk in reply.iter_bytes(_CHUNK):
            hasher.update(chunk)
            spool.write(chunk)
            size += len(chunk)
        if "sha256:" + hasher.hexdigest() != digest:
            raise ForkError(f"blob {digest[:19]} of {src} arrived with another digest; nothing was written to "
                            f"{dst.repository}'s tags: run the fork again.")
        spool.seek(0)

        def chunks() -> Iterator[bytes]:  # streamed back from disk, never whole in memory
            while block := spool.read(_CHUNK):
                yield block

        sep = "&" if "?" in location else "?"
        put = client.put(f"{location}{sep}digest={digest}", content=chunks(),
                         headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})
        _check(put, f"uploading blob {digest[:19]} to {dst.repository}")
    return True


def _copy_manifest(client: httpx.Client, src: ImageRef, dst: ImageRef, reference: str, depth: int,
                   stats: dict[str, int]) -> tuple[bytes, str]:
    body, media_type = _get_manifest(client, src, reference)
    doc: dict[str, Any] = json.loads(body)
    if media_type in _INDEX_TYPES:
        if depth >= _MAX_INDEX_DEPTH:
            raise ForkError(f"{src}: indexes nest deeper than {_MAX_INDEX_DEPTH}; not an image.")
        for child in doc.get("manifests", []):
            child_body, child_type = _copy_manifest(client, src, dst, child["digest"], depth + 1, stats)
            _put_manifest(client, dst, child["digest"], child_body, child_type)
    else:
        for blob in [doc["config"], *doc.get("layers", [])]:
            stats["copied" if _copy_blob(client, src, dst, blob["digest"]) else "reused"] += 1
    return body, media_type


def _put_manifest(client: httpx.Client, dst: ImageRef, reference: str, body: bytes, media_type: str) -> None:
    reply = client.put(f"{dst.base}/manifests/{reference}", content=body, headers={"Content-Type": media_type})
    _check(reply, f"writing manifest {reference} to {dst.host}/{dst.repository}")


def copy_image(src: ImageRef, dst: ImageRef) -> dict[str, Any]:
    """Copy ``src`` to ``dst`` (refused when ``dst`` exists); returns the digest and blob counts.

    DEST's tag is written last, after every blob and child manifest is in place, so a failure
    part-way leaves no DEST tag (only unreferenced blobs, which the registry's GC removes)."""
    import httpx

    with httpx.Client(timeout=_TIMEOUT_S, follow_redirects=True) as client:
        try:
            exists = client.head(f"{dst.base}/manifests/{dst.reference}",
                                 headers={"Accept": ", ".join(_MANIFEST_TYPES)})
            if exists.status_code == 200:
                raise ForkError(f"{dst} exists: `openenv fork` never overwrites; give DEST another tag or "
                                "repository.", EXIT_USAGE)
            if exists.status_code != 404:
                _check(exists, f"checking {dst}")
            stats = {"copied": 0, "reused": 0}
            body, media_type = _copy_manifest(client, src, dst, src.reference, 0, stats)
            _put_manifest(client, dst, dst.reference, body, media_type)
        except httpx.HTTPError as exc:
            raise ForkError(f"registry unreachable ({type(exc).__name__}: {exc}); check the host and port, and "
                            "that the registry is up.") from None
    return {"digest": _digest(body), "media_type": media_type, **stats}


# -- Hugging Face ---------------------------------------------------------------------------------


def _key_values(values: list[str], flag: str) -> list[dict[str, str]]:
    pairs = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise ForkError(f"{flag} {value!r}: write KEY=VALUE, e.g. {flag} MODEL_ID=org/model.", EXIT_USAGE)
        pairs.append({"key": key.strip(), "value": rest})
    return pairs


def _fork_space(source: str, dest: str | None, *, private: bool, variables: list[dict[str, str]],
                secrets: list[dict[str, str]], hardware: str | None) -> str:
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:
        raise ForkError("forking a Space needs huggingface_hub: `pip install 'openenvkit-catalog[hf]'`.") from None
    api = HfApi()
    try:
        if dest is None:
            dest = f"{api.whoami()['name']}/{source.split('/', 1)[1]}"
        if api.repo_exists(dest, repo_type="space"):
            raise ForkError(f"Space {dest} exists: `openenv fork` never overwrites; give DEST another name "
                            "(or delete that Space on the Hub first).", EXIT_USAGE)
        if not api.repo_exists(source, repo_type="space"):
            raise ForkError(f"Space {source} does not exist (or is private to someone else): check SOURCE.",
                            EXIT_USAGE)
        # The Hub requires a hardware flavour when duplicating; the free one unless asked otherwise.
        options: dict[str, Any] = {"private": private, "exist_ok": False}
        duplicate = getattr(api, "duplicate_space", None)
        if duplicate is not None:
            url = duplicate(source, to_id=dest, hardware=hardware or "cpu-basic", variables=variables or None,
                            secrets=secrets or None, **options)
        else:  # huggingface_hub 1.x folded duplicate_space into duplicate_repo
            url = api.duplicate_repo(source, to_id=dest, repo_type="space",
                                     space_hardware=hardware or "cpu-basic",  # type: ignore[arg-type]
                                     space_variables=variables or None, space_secrets=secrets or None, **options)
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        hint = " Log in (`hf auth login`) or set HF_TOKEN." if status in (401, 403) else ""
        raise ForkError(f"the Hub refused the fork (HTTP {status}): {str(exc).splitlines()[0]}.{hint}") from None
    return str(url)


def fork(
    source: Annotated[str, typer.Argument(help="A Space (owner/name) or an image (HOST[:PORT]/REPO[:TAG]).")],
    dest: Annotated[str | None, typer.Argument(
        help="New name: owner/name for a Space (default: your account, same name), HOST/REPO:TAG for an image."
    )] = None,
    repo_id: Annotated[str | None, typer.Option("--repo-id", "-r", help="Upstream's spelling of DEST.")] = None,
    private: Annotated[bool, typer.Option("--private", help="Make the new Space private.")] = False,
    set_env: Annotated[list[str] | None, typer.Option(
        "--set-env", "-e", help="Space variable KEY=VALUE (repeatable).")] = None,
    set_secret: Annotated[list[str] | None, typer.Option(
        "--set-secret", "--secret", "-s", help="Space secret KEY=VALUE (repeatable).")] = None,
    hardware: Annotated[str | None, typer.Option(
        "--hardware", "-H", help="Space hardware, e.g. cpu-basic (default), t4-medium.")] = None,
) -> None:
    """Copy a published env under a new name: a Hugging Face Space, or an image between OCI registries."""
    if dest is not None and repo_id is not None and dest != repo_id:
        fail(f"DEST {dest!r} and --repo-id {repo_id!r} differ: give one of them.", EXIT_USAGE)
    dest = dest or repo_id
    try:
        image = parse_image(source)
        if image is not None:
            tag = "v1" if image.reference.startswith("sha256:") else image.reference
            example = f"{image.host}/{image.repository}-fork:{tag}"
            if dest is None:
                fail(f"DEST is required for an image: e.g. `openenv fork {source} {example}`.", EXIT_USAGE)
            target = parse_image(dest or "")
            if target is None:
                fail(f"DEST {dest!r} is not an image reference: write HOST[:PORT]/REPO[:TAG], e.g. {example}.",
                     EXIT_USAGE)
            assert target is not None
            if any((private, set_env, set_secret, hardware)):
                fail("--private, --set-env, --set-secret and --hardware apply to Spaces, not images: drop them.",
                     EXIT_USAGE)
            done = copy_image(image, target)
            typer.echo(f"forked {image} -> {target} ({done['digest']}; {done['copied']} blobs copied, "
                       f"{done['reused']} already there or mounted)")
            return
        space = space_id(source)
        if space is None:
            fail(f"SOURCE {source!r} is neither a Space (owner/name) nor an image with its registry "
                 "(HOST[:PORT]/REPO[:TAG]; Docker Hub's is docker.io/...).", EXIT_USAGE)
        assert space is not None
        target_space = space_id(dest) if dest is not None else None
        if dest is not None and target_space is None:
            fail(f"DEST {dest!r} is not a Space id: write owner/name.", EXIT_USAGE)
        url = _fork_space(space, target_space, private=private, variables=_key_values(set_env or [], "--set-env"),
                          secrets=_key_values(set_secret or [], "--set-secret"), hardware=hardware)
    except ForkError as exc:
        fail(str(exc), exc.code)
    typer.echo(f"forked Space {space} -> {url}")

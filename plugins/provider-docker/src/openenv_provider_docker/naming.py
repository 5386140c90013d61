"""Names and labels shared by ``openenv build`` and the container providers (docker, swarm).

Promises:

* ``image_tag(env, version)`` is *the* tag convention: ``openenv-<env>:<version>``. ``openenv build``
  tags what it builds with it (and with ``:latest``), and providers derive the image to run from an
  env name with it, so ``openenv build envs/echo`` followed by ``openenv run echo --provider docker``
  needs no image name anywhere.
* Every resource a provider creates (container, service, network) carries ``managed_labels``:
  ``org.openenv.managed=true``, ``org.openenv.provider``, ``org.openenv.owner`` (an
  ``owner_id()``) and ``org.openenv.env``. ``list``/``gc`` select by these labels only, so they
  never touch anything they did not create.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

__all__ = [
    "CONTAINER_PORT",
    "LABEL_BUILD_HASH",
    "LABEL_BUILD_STAGE",
    "LABEL_ENV",
    "LABEL_MANAGED",
    "LABEL_OWNER",
    "LABEL_PROVIDER",
    "LABEL_READ_ONLY",
    "LABEL_SANDBOX_DROP",
    "LABEL_SANDBOX_GVISOR",
    "LABEL_SERVE",
    "LABEL_VERSION",
    "derived_image",
    "image_repository",
    "image_tag",
    "is_image_reference",
    "label_filters",
    "managed_labels",
    "owner_network_name",
    "resource_name",
]

#: Port the env server listens on inside every container (upstream's convention, docs/protocol.md §5.1).
CONTAINER_PORT = 8000

LABEL_MANAGED = "org.openenv.managed"
LABEL_PROVIDER = "org.openenv.provider"
LABEL_OWNER = "org.openenv.owner"
LABEL_ENV = "org.openenv.env"
#: On images built by ``openenv build``: the env package's version.
LABEL_VERSION = "org.openenv.version"
#: On images built by ``openenv build``: the image's CMD is ``openenv serve`` and accepts its options.
LABEL_SERVE = "org.openenv.serve"
#: On images: ``"false"`` when the env needs a writable root filesystem (manifest ``read_only_root``).
LABEL_READ_ONLY = "org.openenv.read-only-root"
#: On images of envs whose manifest declares ``sandbox:`` (``openenv.manifest.SandboxNeeds``):
#: ``"true"`` when the server must start as root with the sandbox's capabilities, and the gVisor
#: policy (``auto``, ``required``, ``off``). Images without them get neither.
LABEL_SANDBOX_DROP = "org.openenv.sandbox.drop-privileges"
LABEL_SANDBOX_GVISOR = "org.openenv.sandbox.gvisor"
#: On images: hash of the build inputs, so an unchanged env is not rebuilt.
LABEL_BUILD_HASH = "org.openenv.build-hash"
#: On the intermediate image of a build's first stage (value: the env), so old ones can be pruned.
LABEL_BUILD_STAGE = "org.openenv.build-stage"

_REPO_BAD = re.compile(r"[^a-z0-9._-]+")
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


def image_repository(env: str) -> str:
    """``openenv-<env>``, lower-cased, with characters Docker refuses replaced by ``-``."""
    name = _REPO_BAD.sub("-", env.lower()).strip("-._") or "env"
    return f"openenv-{name}"


def image_tag(env: str, version: str | None = None) -> str:
    """The image tag for ``env`` at ``version`` (``latest`` when unknown): ``openenv-echo:0.1.0``."""
    tag = _TAG_BAD.sub("-", version or "latest").lstrip(".-")[:128] or "latest"
    return f"{image_repository(env)}:{tag}"


def is_image_reference(text: str) -> bool:
    """Whether ``LaunchSpec.env`` names an image rather than an env (it has a tag, digest or path).

    Env names never contain ``:`` or ``/``; image references that name a tag, a digest or a
    registry path always do. A bare word is taken as an env name.
    """
    return ":" in text or "/" in text or "@" in text


def derived_image(env: str) -> str:
    """The image a provider runs for ``env`` when none is given.

    The tag carries the version of the installed distribution that registers ``env`` (the same
    one ``openenv build`` reads from its pyproject), or ``latest`` when the env is not installed
    here (an image built elsewhere and loaded or pulled under ``:latest``).
    """
    return image_tag(env, _installed_env_version(env))


def _installed_env_version(env: str) -> str | None:
    try:
        from openenv.plugins import get_plugin_manager

        pm = get_plugin_manager()
        entry = pm.catalog.envs.get(env)
        version = entry.extra.get("version")
        if isinstance(version, str) and version:
            return version
        info = pm.infos.get(entry.plugin)
        return str(info.version) if info is not None and info.version else None
    except Exception:  # an unknown env or a broken plugin: fall back to :latest
        return None


def managed_labels(
    *, provider: str, owner: str, env: str, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Labels for one resource; ``extra`` may add labels but never replace the managed ones."""
    labels = dict(extra or {})
    labels.update({
        LABEL_MANAGED: "true",
        LABEL_PROVIDER: provider,
        LABEL_OWNER: owner,
        LABEL_ENV: env,
    })
    return labels


def label_filters(provider: str, owner: str | None = None) -> list[str]:
    """Docker ``label`` filters selecting resources of ``provider`` (and of ``owner`` if given)."""
    filters = [f"{LABEL_MANAGED}=true", f"{LABEL_PROVIDER}={provider}"]
    if owner is not None:
        filters.append(f"{LABEL_OWNER}={owner}")
    return filters


def resource_name(env: str, suffix: str) -> str:
    """A container/service name: ``openenv-<env>-<suffix>`` (Docker's name alphabet)."""
    return f"{image_repository(env)}-{suffix}"[:63]


def owner_network_name(provider: str, owner: str) -> str:
    """The per-owner network's name (hashed: an owner id has characters names cannot have)."""
    digest = hashlib.sha256(owner.encode()).hexdigest()[:12]
    return f"openenv-{provider}-{digest}"

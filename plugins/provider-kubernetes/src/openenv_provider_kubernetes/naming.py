"""Names, labels and the image convention of the ``kubernetes`` provider.

Promises:

* Every object the provider creates (Pod, Service) carries ``managed_labels``:
  ``openenv.org/managed=true``, ``openenv.org/provider=kubernetes``, ``openenv.org/owner`` (the
  owner's ``owner_id()`` made into a valid label value), ``openenv.org/env`` and
  ``openenv.org/instance`` (the Pod's name, which the Service selects). The exact ``owner_id()``
  is kept in the annotation ``openenv.org/owner`` (label values cannot hold ``:``), and that is
  what ``gc`` checks (with the owner Lease named by ``openenv.org/owner-lease``, ``lease``).
  ``ps``/``gc`` select by these labels only, so they never touch anything they did not create.
* ``derived_image(env)`` is the tag ``openenv build`` gives an env's image,
  ``openenv-<env>:<installed version>`` (``:latest`` when the env is not installed here) - the same
  convention as the docker provider's, so ``openenv build envs/echo`` makes what this provider runs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

__all__ = [
    "ANNOTATION_OWNER",
    "LABEL_ENV",
    "LABEL_INSTANCE",
    "LABEL_MANAGED",
    "LABEL_OWNER",
    "LABEL_PROVIDER",
    "PROVIDER",
    "SERVER_PORT",
    "derived_image",
    "image_repository",
    "is_image_reference",
    "label_value",
    "managed_labels",
    "object_name",
    "selector",
]

PROVIDER = "kubernetes"
#: Port the env server listens on inside the Pod (upstream's convention, docs/protocol.md §5.1).
SERVER_PORT = 8000

LABEL_MANAGED = "openenv.org/managed"
LABEL_PROVIDER = "openenv.org/provider"
LABEL_OWNER = "openenv.org/owner"
LABEL_ENV = "openenv.org/env"
LABEL_INSTANCE = "openenv.org/instance"
ANNOTATION_OWNER = "openenv.org/owner"

_LABEL_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_BAD = re.compile(r"[^a-z0-9-]+")


def label_value(text: str) -> str:
    """``text`` as a Kubernetes label value (63 characters of ``[A-Za-z0-9._-]``, alphanumeric at
    both ends); a long value becomes a readable prefix plus a hash, so it stays unique."""
    value = _LABEL_BAD.sub(".", text).strip("._-")
    if len(value) > 63:
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        value = f"{value[:46].rstrip('._-')}.{digest}"
    return value or "none"


def managed_labels(*, owner: str, env: str, instance: str,
                   extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Labels for one object; ``extra`` may add labels but never replace the managed ones."""
    labels = {str(k): str(v) for k, v in (extra or {}).items()}
    labels.update({
        LABEL_MANAGED: "true",
        LABEL_PROVIDER: PROVIDER,
        LABEL_OWNER: label_value(owner),
        LABEL_ENV: label_value(env),
        LABEL_INSTANCE: instance,
    })
    return labels


def selector(owner: str | None = None) -> str:
    """A label selector for this provider's objects (of ``owner`` if given)."""
    parts = [f"{LABEL_MANAGED}=true", f"{LABEL_PROVIDER}={PROVIDER}"]
    if owner is not None:
        parts.append(f"{LABEL_OWNER}={label_value(owner)}")
    return ",".join(parts)


def object_name(env: str, suffix: str) -> str:
    """A Pod/Service name: ``openenv-<env>-<suffix>`` as a DNS-1035 label (63 characters)."""
    base = _NAME_BAD.sub("-", env.lower()).strip("-") or "env"
    return f"openenv-{base[: 62 - len('openenv-') - len(suffix)]}-{suffix}".replace("--", "-")


def is_image_reference(text: str) -> bool:
    """Whether ``LaunchSpec.env`` names an image (a tag, digest or path) rather than an env."""
    return ":" in text or "/" in text or "@" in text


def image_repository(env: str) -> str:
    """``openenv-<env>`` with characters image names refuse replaced by ``-``."""
    name = re.sub(r"[^a-z0-9._-]+", "-", env.lower()).strip("-._") or "env"
    return f"openenv-{name}"


def derived_image(env: str) -> str:
    """The image ``openenv build`` tags for ``env``: ``openenv-<env>:<version>``."""
    version = _installed_env_version(env) or "latest"
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "-", version).lstrip(".-")[:128] or "latest"
    return f"{image_repository(env)}:{tag}"


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

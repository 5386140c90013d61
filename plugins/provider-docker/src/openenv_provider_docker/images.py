"""Which image a container provider runs for a ``LaunchSpec``, and how the server in it is started.

Promises:

* ``spec.image`` wins. Otherwise ``spec.env`` is an image reference when it has a tag, digest or
  path (``openenv-echo:0.1.0``, ``ghcr.io/x/y``), and an env name when it is a bare word, in which
  case the image is derived with the shared tag convention (``naming.derived_image``).
* A missing image is pulled only by the pull policy (``options["pull"]``); a derived image that
  is missing fails at once with the ``openenv build`` command that makes it.
* Images built by ``openenv build`` (label ``org.openenv.serve=1``) get their ``CMD`` (an
  ``openenv serve`` line) extended with ``--max-sessions``; other images (upstream OpenEnv images)
  keep their own command and only receive environment variables and port 8000.
* Secrets travel only in the container's environment (``OPENENV_TOKEN``, ``spec.env_vars``), never
  in its command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from openenv.errors import ConfigError
from openenv_provider_docker.naming import (
    LABEL_ENV,
    LABEL_READ_ONLY,
    LABEL_SANDBOX_DROP,
    LABEL_SANDBOX_GVISOR,
    LABEL_SERVE,
    derived_image,
    is_image_reference,
)

if TYPE_CHECKING:
    import docker

    from openenv.interfaces import LaunchSpec
    from openenv_provider_docker.options import ContainerOptions

__all__ = ["ResolvedImage", "resolve_image", "server_command", "server_environment"]


@dataclass(frozen=True)
class ResolvedImage:
    """An image present in the engine, and what it says about itself."""

    ref: str
    id: str
    env: str
    derived: bool
    cmd: tuple[str, ...] | None
    serves_openenv: bool
    read_only_ok: bool
    #: The env's manifest asks for ``sandbox.drop_privileges`` (label ``org.openenv.sandbox.drop-privileges``).
    sandbox_drop_privileges: bool = False
    #: Its gVisor policy (``auto``, ``required``, ``off``), or None when it declares no sandbox.
    sandbox_gvisor: str | None = None


def resolve_image(client: docker.DockerClient, spec: LaunchSpec, opts: ContainerOptions,
                  *, provider: str) -> ResolvedImage:
    """Find (or pull, as the policy allows) the image for ``spec``."""
    from docker.errors import APIError, ImageNotFound

    if spec.image:
        ref, derived = spec.image, False
    elif is_image_reference(spec.env):
        ref, derived = spec.env, False
    else:
        ref, derived = derived_image(spec.env), True
    policy = opts.pull or ("never" if derived else "missing")
    image = None
    if policy != "always":
        try:
            image = client.images.get(ref)
        except ImageNotFound:
            image = None
    if image is None:
        if policy == "never":
            hint = (f"Build it: `openenv build <folder of the env package registering '{spec.env}'>` "
                    f"(it tags {ref}), or run an image by its reference (`openenv run IMAGE[:TAG] --provider "
                    f"docker`, LaunchSpec(image=...))."
                    if derived else
                    "Pull or build it first, or allow pulling with options={'pull': 'missing'}.")
            raise ConfigError(f"Image {ref!r} is not in the engine used by the {provider} provider. {hint}")
        try:
            image = client.images.pull(ref)
        except APIError as exc:
            raise ConfigError(f"Image {ref!r} is not in the engine and pulling it failed: "
                              f"{exc.explanation or exc}. Build or load it first.") from None
    labels = image.labels or {}
    config = image.attrs.get("Config") or {}
    cmd = config.get("Cmd")
    env = labels.get(LABEL_ENV) or (spec.env if not is_image_reference(spec.env) else ref)
    return ResolvedImage(
        ref=ref,
        id=image.id,
        env=env,
        derived=derived,
        cmd=tuple(cmd) if cmd else None,
        serves_openenv=labels.get(LABEL_SERVE) == "1",
        read_only_ok=labels.get(LABEL_READ_ONLY, "true").lower() != "false",
        sandbox_drop_privileges=labels.get(LABEL_SANDBOX_DROP, "").lower() == "true",
        sandbox_gvisor=labels.get(LABEL_SANDBOX_GVISOR) or None,
    )


def server_command(image: ResolvedImage, spec: LaunchSpec) -> list[str] | None:
    """The container command: the image's ``openenv serve`` CMD plus options, or ``None`` (keep the
    image's own command) for images not built by ``openenv build``."""
    if not image.serves_openenv or not image.cmd:
        return None
    if spec.max_sessions is not None and spec.max_sessions < 1:
        raise ConfigError(f"max_sessions={spec.max_sessions}: must be at least 1.")
    return [*image.cmd, *spec.max_sessions_args()]


def server_environment(spec: LaunchSpec) -> dict[str, str]:
    """Environment of the server: ``spec.env_vars`` plus the token and mode (never in argv)."""
    environment = {str(k): str(v) for k, v in spec.env_vars.items()}
    if spec.token:
        environment["OPENENV_TOKEN"] = spec.token
    if spec.mode:
        environment["OPENENV_MODE"] = spec.mode
    return environment

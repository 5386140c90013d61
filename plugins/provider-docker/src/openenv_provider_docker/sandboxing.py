"""What a container provider gives an env whose manifest declares ``sandbox:`` (recorded by
``openenv build`` as image labels; ``openenv.manifest.SandboxNeeds``), and nothing to other envs.

Why: ``openenv_sandbox`` runs each execution of untrusted code as its own unprivileged uid, which
needs a root holding ``CAP_SETUID``/``CAP_SETGID`` (and ``CAP_CHOWN``, to hand the execution its
directory). The hardened container otherwise runs the server as uid 10001 with no capability at
all, and then every execution shares the server's uid. See docs/security.md.

Promises:

* ``identity(image, opts)``: for an image whose env asks for ``sandbox.drop_privileges``, the
  container runs as ``0:0`` with exactly ``SANDBOX_CAPS`` added to ``cap_drop=ALL`` (plus any
  ``options["cap_add"]``); ``no-new-privileges``, the read-only root and every limit stay. An
  explicit ``options["user"]`` wins and adds nothing (the env's ``/metadata`` then reports that
  privileges are not dropped). Every other image keeps its user and no capability.
* ``runtime(client, image, opts)``: ``options["runtime"]`` when given (it must be registered with
  the engine; ``"default"`` means the engine's default); else gVisor's ``runsc`` for an env whose
  ``sandbox.gvisor`` is ``auto`` (when the engine has it) or ``required`` (a ``ConfigError``
  naming how to register it when it has not); else the engine's default (``None``).
* ``pids_limit(runtime, opts, explicit)``: under ``runsc`` the container's pids cgroup counts
  gVisor's own host threads and stub processes too, so a fork bomb that the sandbox's
  ``RLIMIT_NPROC`` keeps to 32 processes still exhausted the default 256 and took the whole
  gVisor sandbox down (measured: Debian's runsc 20221219); the default becomes
  ``GVISOR_PIDS_LIMIT`` there. An explicit ``options["pids_limit"]`` is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.errors import ConfigError

if TYPE_CHECKING:
    import docker

    from openenv_provider_docker.images import ResolvedImage
    from openenv_provider_docker.options import ContainerOptions

__all__ = ["GVISOR_PIDS_LIMIT", "GVISOR_RUNTIME", "SANDBOX_CAPS", "engine_runtimes", "identity", "pids_limit",
           "runtime"]

#: Exactly what ``openenv_sandbox`` needs to drop privileges (``openenv_sandbox.trees``: no
#: ``CAP_DAC_OVERRIDE`` or ``CAP_FOWNER``; the zygote's sweep kills as the slot's uid, so no ``CAP_KILL``).
SANDBOX_CAPS = ("SETUID", "SETGID", "CHOWN")
#: The name gVisor's runtime is registered under (``dockerd --add-runtime runsc=/usr/bin/runsc``).
GVISOR_RUNTIME = "runsc"
#: The pids limit of a runsc container unless one is given (see ``pids_limit``).
GVISOR_PIDS_LIMIT = 4096
_REGISTER = ("Install runsc (Debian: apt-get install runsc) and register it with the engine: start dockerd with "
             "--add-runtime runsc=/usr/bin/runsc, or add {\"runtimes\": {\"runsc\": {\"path\": \"/usr/bin/runsc\"}}} "
             "to /etc/docker/daemon.json and reload dockerd (SIGHUP)")


def identity(image: ResolvedImage, opts: ContainerOptions) -> tuple[str | None, tuple[str, ...]]:
    """``(user, cap_add)`` of the container (``user`` None: the image's own)."""
    if image.sandbox_drop_privileges and opts.user is None:
        return "0:0", tuple(dict.fromkeys(SANDBOX_CAPS + opts.cap_add))
    return opts.user, opts.cap_add


def pids_limit(runtime: str | None, opts: ContainerOptions, explicit: bool) -> int:
    """The container's pids limit for ``runtime``; see the module docstring."""
    if runtime == GVISOR_RUNTIME and not explicit:
        return max(opts.pids_limit, GVISOR_PIDS_LIMIT)
    return opts.pids_limit


def engine_runtimes(client: docker.DockerClient) -> list[str]:
    """The OCI runtimes the engine has registered (``docker info``'s ``Runtimes``)."""
    return sorted((client.info().get("Runtimes") or {}).keys())


def runtime(client: docker.DockerClient, image: ResolvedImage, opts: ContainerOptions) -> str | None:
    """The runtime to create the container with (None: the engine's default); see the module."""
    if opts.runtime == "default":
        return None
    if opts.runtime is not None:
        available = engine_runtimes(client)
        if opts.runtime not in available:
            raise ConfigError(f"options['runtime']={opts.runtime!r}: this engine has no such runtime (it has "
                              f"{', '.join(available) or 'none listed'}). Register it with dockerd (--add-runtime "
                              "NAME=PATH, or \"runtimes\" in /etc/docker/daemon.json), or leave the option out.")
        return opts.runtime
    if image.sandbox_gvisor not in ("auto", "required"):
        return None
    available = engine_runtimes(client)
    if GVISOR_RUNTIME in available:
        return GVISOR_RUNTIME
    if image.sandbox_gvisor == "required":
        have = ", ".join(available) or "none"
        raise ConfigError(f"The {image.env} env requires gVisor (its openenv.yaml says sandbox.gvisor: required), "
                          f"but this engine has no {GVISOR_RUNTIME!r} runtime (it has {have}). {_REGISTER}; or "
                          "set sandbox.gvisor: auto to run without it.")
    return None

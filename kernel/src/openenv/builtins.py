"""The kernel's own plugin: built-in fallbacks for decision hooks."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from openenv.errors import UnknownNameError, did_you_mean
from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.context import ServerConfig, ServerContext
    from openenv.serving import HttpServer

__all__ = ["DEFAULT_PROVIDER", "openenv_choose_provider", "openenv_make_server", "openenv_register_providers",
           "unavailable_provider"]

#: The provider used when neither the user nor a plugin chose one.
DEFAULT_PROVIDER = "local"


def unavailable_provider(name: str, available: list[str], *, why: str = "") -> UnknownNameError:
    """The error for a provider name that is not installed: closest name and the package to get."""
    close = did_you_mean(name, available)
    fix = ("Choose an installed one with --provider." if close else
           f"Install it (e.g. `pip install openenvkit-provider-{name}`) or choose an installed one "
           "with --provider.")
    return UnknownNameError("provider", name, available, hint=(f"{why} " if why else "") + fix)


@hookimpl(trylast=True)
def openenv_choose_provider(env: str, requested: str | None, available: list[str]) -> str | None:
    """Fallback: what the user asked for, else ``local``; never a provider that is not installed."""
    name = requested or DEFAULT_PROVIDER
    if name in available:
        return name
    why = "" if requested else f"No provider was requested for env '{env}', and the default is '{name}'."
    raise unavailable_provider(name, available, why=why)


@hookimpl(trylast=True)
def openenv_make_server(app: Any, config: ServerConfig, ctx: ServerContext | None, log_level: str) -> HttpServer | None:
    """Fallback: plain uvicorn, saying in the log which protections are off without
    ``openenvkit-serve-uvicorn``."""
    import uvicorn

    from openenv.serving import PLAIN_UVICORN_OFF, uvicorn_options

    logging.getLogger("openenv.server").warning(
        "serving on plain uvicorn (openenvkit-serve-uvicorn is not installed or is disabled); off: %s. "
        "Install openenvkit-serve-uvicorn to turn them on.", PLAIN_UVICORN_OFF)
    return uvicorn.Server(uvicorn.Config(app, **uvicorn_options(config, log_level)))


@hookimpl
def openenv_register_providers(registry: Any) -> None:
    """Providers written for upstream OpenEnv (``ContainerProvider`` subclasses), through an adapter.

    Found from installed distributions' metadata and source, never imported here
    (``openenv.upstream_providers``).
    """
    from openenv.upstream_providers import adapted_provider, upstream_provider_refs

    for name, ref, dist in upstream_provider_refs():
        registry.register(name, adapted_provider(name, ref, dist),
                          description=f"upstream provider {ref}" + (f" ({dist})" if dist else "") + ", adapted")

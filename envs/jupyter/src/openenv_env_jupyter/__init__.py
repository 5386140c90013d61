"""A persistent Jupyter kernel per session, with graded data tasks.

Names are imported on first use: loading the plugin hook module (``openenv_env_jupyter.plugin``),
which imports this package, must not import the env (nor jupyter-client).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_jupyter.env import JupyterEnv
    from openenv_env_jupyter.kernel import KernelLimits, PersistentKernel
    from openenv_env_jupyter.models import JupyterAction, JupyterObservation, JupyterState
    from openenv_env_jupyter.oracle import solve


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "JupyterAction": ".models",
    "JupyterEnv": ".env",
    "JupyterObservation": ".models",
    "JupyterState": ".models",
    "KernelLimits": ".kernel",
    "PersistentKernel": ".kernel",
    "solve": ".oracle",
})

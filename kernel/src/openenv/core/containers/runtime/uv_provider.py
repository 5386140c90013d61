"""``UVProvider``: upstream's "run the env from its project folder" runtime, over our ``local`` provider."""

from __future__ import annotations

from typing import Any

from openenv.core.containers.runtime.providers import RuntimeProvider, wait_for_health

__all__ = ["UVProvider"]


class UVProvider(RuntimeProvider):
    """Serve the env at ``project_path`` (an env folder with an ``openenv.yaml``, or an installed env's name).

    Upstream ran ``uv run`` in the project (a git URL was cloned first); here our ``local``
    provider runs ``openenv serve <project_path>`` in a subprocess. Git URLs are not fetched.
    """

    def __init__(self, project_path: str, *, app: str | None = None, host: str = "127.0.0.1",
                 reload: bool = False, env_vars: dict[str, str] | None = None,
                 context_timeout_s: float = 60.0) -> None:
        if project_path.startswith(("git+", "http://", "https://")):
            from openenv.core._unsupported import refuse

            refuse(f"`UVProvider(project_path={project_path!r})`",
                   "clone or install the env first, then pass its folder or its installed name",
                   "Nothing is downloaded by this OpenEnv's providers")
        self.project_path, self.app, self.host = project_path, app, host
        self.env_vars = dict(env_vars or {})
        self.context_timeout_s = context_timeout_s
        self._handle: Any = None

    @property
    def base_url(self) -> str | None:
        return None if self._handle is None else str(self._handle.base_url)

    def start(self, port: int | None = None, env_vars: dict[str, str] | None = None, **kwargs: Any) -> str:
        from openenv.interfaces import LaunchSpec
        from openenv.plugins import get_plugin_manager

        if self._handle is not None:
            return str(self._handle.base_url)
        pm = get_plugin_manager()
        provider = pm.catalog.providers.load(pm.choose_provider(self.project_path, "local"))()
        spec = LaunchSpec(env=self.app or self.project_path, env_vars={**self.env_vars, **(env_vars or {})},
                          startup_timeout_s=self.context_timeout_s)
        self._handle = provider.start(spec)
        return str(self._handle.base_url)

    def stop(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.stop()

    def wait_for_ready(self, timeout_s: float = 30.0) -> None:
        if self._handle is None:
            raise RuntimeError("UVProvider is not started: call start() first.")
        wait_for_health(str(self._handle.base_url), timeout_s)

"""Issue 32: SkyRL's OpenEnv integration, its calls reproduced against our Docker provider.

SkyRL's integration (``skyrl-train/integrations/openenv/env.py`` in the NovaSky-AI/SkyRL
repository) is not in any package on the index: ``skyrl`` 0.3.0 and ``skyrl-gym`` 0.4.0 hold no
OpenEnv code, and ``skyrl-train`` is not published. So its calls are reproduced here as it makes
them: ``EnvClass.from_docker_image(env_name + ":latest")`` on an upstream-style client class,
``reset()``, then ``step(Action(message=...))`` reading ``result.observation``, ``.reward`` and
``.done``, with the sync client of upstream 0.10's documented form (``.sync()``: upstream's
bootstrap handle, like ours, has no ``reset`` of its own).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("openenv_provider_docker")
from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv

from openenv_provider_docker.fixtures import docker_client  # noqa: F401 - the fixture skips without an engine

pytestmark = pytest.mark.docker


def test_skyrl_openenv_env_calls(docker_client: Any) -> None:  # noqa: F811
    env_name = "openenv-echo"  # SkyRL's extras["env_name"]; the image is env_name + ":latest", as it builds it
    try:
        docker_client.images.get(env_name + ":latest")
    except Exception:
        pytest.skip("the openenv-echo:latest image is not built here (`openenv build echo` builds it)")
    env = UpstreamStyleEchoEnv.from_docker_image(env_name + ":latest").sync()
    try:
        initial = env.reset()
        assert initial.done is False
        result = env.step(UpstreamStyleEchoAction(message="<from the policy>"))
        observation, reward, done = result.observation, result.reward, result.done
        assert observation.echoed_message == "<from the policy>"
        assert isinstance(reward, float) and done is False
    finally:
        env.close()

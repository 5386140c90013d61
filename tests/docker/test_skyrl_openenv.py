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

import sys
from pathlib import Path

import pytest

# The upstream-style echo client (an EnvClient subclass written against upstream's API) is a
# fixture package of the compatibility layer's tests.
_FIXTURES = Path(__file__).resolve().parents[1] / "compat_layer" / "fixtures"
if str(_FIXTURES) not in sys.path:
    sys.path.insert(0, str(_FIXTURES))

from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leftover_containers")]


def test_skyrl_openenv_env_calls(echo_image: str) -> None:
    # SkyRL's extras["env_name"]; it builds the image name as env_name + ":latest".
    env_name = echo_image.rsplit(":", 1)[0]
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

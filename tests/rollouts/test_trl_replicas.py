"""``environment_class(env, replicas=N)``: TRL's environment_factory class over N servers behind an
``openenv.EnvPool`` (no TRL needed to build and drive the class: TRL calls these same methods)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from openenv.errors import ConfigError
from openenv_rollouts.trl import environment_class

pytestmark = [pytest.mark.usefixtures("no_leftover_processes"),
              pytest.mark.requires_plugins("provider-local", "transport-ws", "env-echo")]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def test_instances_spread_over_the_replicas_and_shutdown_stops_them() -> None:
    cls = environment_class("echo", replicas=2, max_sessions=2)
    try:
        pool = cls._pool
        assert pool is not None and cls._handle is None
        urls = [r.url for r in pool.replicas()]
        assert len(urls) == 2 and len(set(urls)) == 2
        instances = [cls() for _ in range(4)]
        assert sorted(r.sessions for r in pool.replicas()) == [2, 2]  # least-loaded placement
        for i, inst in enumerate(instances):
            assert "message" in inst.reset()
            text = inst.step(message=f"hi {i}")  # type: ignore[attr-defined]
            assert f"hi {i}" in text and inst.reward > 0
        for inst in instances[:3]:
            inst._close()
        assert sum(r.sessions for r in pool.replicas()) == 1  # closing frees the place in the pool
        instances[3]._close()
        instances[3]._close()  # twice is harmless
        assert all(_answers(u) for u in urls)
    finally:
        cls.shutdown()
    assert cls._pool is None and not any(_answers(u) for u in urls)


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"replicas": 0}, "replicas must be an integer >= 1"),
    ({"replicas": True}, "replicas must be an integer >= 1"),
    ({"replicas": 2, "base_url": "http://127.0.0.1:9"}, "cannot be combined with base_url"),
])
def test_bad_replicas_are_refused_before_anything_starts(kwargs: dict[str, object], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        environment_class("echo", **kwargs)  # type: ignore[arg-type]

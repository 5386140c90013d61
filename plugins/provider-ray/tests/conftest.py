"""Fixtures for the ray provider tests: one local Ray head per session, on 127.0.0.1, that this
process joins as its driver (``ray.init``) and stops by PID at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from openenv_provider_ray.testing import LocalRayHead


@pytest.fixture(scope="session")
def ray_head() -> Iterator[LocalRayHead]:
    """A 2-CPU Ray head for the whole session; this process is connected to it as a driver."""
    saved = dict(os.environ)
    with LocalRayHead(num_cpus=2) as head:
        os.environ.update(head.environment())  # subprocesses (the CLI, orphans) join it too
        import ray

        ray.init(address=head.address, namespace="openenv", log_to_driver=False)
        try:
            yield head
        finally:
            ray.shutdown()
            os.environ.clear()
            os.environ.update(saved)

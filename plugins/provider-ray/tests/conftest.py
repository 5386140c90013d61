"""Fixtures for the ray provider tests: one local Ray cluster of two nodes per session, on 127.0.0.1
(a head, and a worker node started separately that joins it), that this process joins as its driver
(``ray.init``) and stops by PID at the end.

Each node has one ``pool_slot`` (``SLOT``): actors that ask for it land one per node."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from openenv_provider_ray.testing import LocalRayHead

#: A custom resource each node has one of: an actor asking for it takes a node of its own.
SLOT = "pool_slot"


@pytest.fixture(scope="session")
def ray_head() -> Iterator[LocalRayHead]:
    """A 2-CPU Ray head and a 1-CPU worker node for the whole session; this process is connected
    to the head as a driver."""
    saved = dict(os.environ)
    with LocalRayHead(num_cpus=2, resources={SLOT: 1}) as head:
        head.add_worker(num_cpus=1, resources={SLOT: 1})
        os.environ.update(head.environment())  # subprocesses (the CLI, orphans) join it too
        import ray

        ray.init(address=head.address, namespace="openenv", log_to_driver=False)
        try:
            yield head
        finally:
            ray.shutdown()
            os.environ.clear()
            os.environ.update(saved)

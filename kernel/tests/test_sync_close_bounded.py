"""``SyncEnvClient.close()`` is bounded: a close that cannot finish (its loop wedged after a call
was interrupted by a signal-raised exception in the main thread) is dropped after
``CLOSE_TIMEOUT_S``, so the caller's cleanup (``openenv run`` on SIGTERM) never hangs on it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from openenv.client import EnvClient
from openenv.client_sync import SyncEnvClient, _LoopThread


class _StuckClose(EnvClient):  # type: ignore[type-arg]
    async def close(self) -> None:
        await asyncio.sleep(3600)


def test_a_close_that_never_finishes_is_dropped_after_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    client = SyncEnvClient(_StuckClose("http://127.0.0.1:9"))
    client.CLOSE_TIMEOUT_S = 0.2
    with caplog.at_level(logging.WARNING, logger="openenv.client"):
        client.close()
    assert "did not close within" in caplog.text


def test_the_loop_thread_cancels_what_it_gave_up_on() -> None:
    runner = _LoopThread()
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    try:
        with pytest.raises(TimeoutError):
            runner.run(forever(), timeout=0.1)
        assert runner.run(asyncio.wait_for(cancelled.wait(), 5), timeout=5) is True
    finally:
        runner.stop()

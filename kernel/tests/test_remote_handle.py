"""RemoteHandle: the shared part of the remote-sandbox providers' handles."""

from __future__ import annotations

import threading

import pytest

from openenv.remote import RemoteHandle, first_line


class _Sandbox(RemoteHandle):
    def __init__(self, gone: str | None = None) -> None:
        super().__init__(provider="fake", id="fake-1", base_url="http://127.0.0.1:9", env="echo",
                         token=None, probe_mode="auto")
        self.gone = gone
        self.released: list[float] = []

    def where(self) -> str:
        return "fake sandbox sb-1"

    def exit_description(self) -> str | None:
        return self.gone

    def release(self, timeout_s: float) -> None:
        self.released.append(timeout_s)


def test_stop_releases_once_even_from_many_threads() -> None:
    handle = _Sandbox()
    assert handle.is_running()
    threads = [threading.Thread(target=handle.stop, args=(3.0,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    handle.stop()
    assert handle.released == [3.0] and not handle.is_running()


def test_a_gone_sandbox_is_not_running_and_start_up_names_it() -> None:
    handle = _Sandbox(gone="is gone (its sandbox was deleted)")
    assert not handle.is_running()
    with pytest.raises(RuntimeError, match=r"env server 'echo' \(fake sandbox sb-1\) is gone"):
        handle.wait_ready(5.0)
    assert repr(handle) == "<_Sandbox fake-1 fake sandbox sb-1 env='echo'>"


def test_first_line() -> None:
    assert first_line(ValueError("quota\nbody: {...}")) == "quota"
    assert first_line(KeyError()) == "KeyError"

"""Fixtures: a stand-in of Hugging Face Jobs and its sandbox server on 127.0.0.1 (``hf_jobs_fake``),
with the real ``huggingface_hub`` SDK pointed at it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hf_jobs_fake import IMAGE, TOKEN, FakeHFJobs


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHFJobs]:
    import huggingface_hub.constants as constants

    bin_dir = os.path.dirname(sys.executable)  # the sandbox runs `openenv serve` from this venv
    with FakeHFJobs(TOKEN, images={IMAGE}, extra_env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}) as server:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setattr(constants, "ENDPOINT", server.endpoint)  # this process (already imported)
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)  # child processes (read at import)
        # SandboxPool keeps a cache of its hosts under HF_HOME: the test's own, not the user's.
        monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        # *.hf-jobs.test resolves nowhere: the SDK and the relay reach it through the stand-in's
        # CONNECT proxy, and trust its certificate authority.
        monkeypatch.setenv("HTTPS_PROXY", server.https_proxy)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.setenv("SSL_CERT_FILE", server.cafile)
        for var in ("HTTP_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(var, raising=False)
        yield server

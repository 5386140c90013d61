"""``openenv fork OWNER/SPACE [DEST]`` through the real CLI in subprocesses, huggingface_hub driving a
local stand-in of the Hub at its HTTP boundary (hf_fake.py): what the SDK sends is real; the Hub's
copying of the Space is not reproduced."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hf_fake import FakeHub  # noqa: E402

pytestmark = pytest.mark.requires_plugins("catalog")


def openenv(hub: FakeHub, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_test_token", "HF_HUB_DISABLE_TELEMETRY": "1",
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "openenv", "fork", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_fork_a_space_with_upstreams_options() -> None:
    with FakeHub() as hub:
        hub.spaces.add("openenv/echo-env")
        done = openenv(hub, "openenv/echo-env", "bob/my-echo", "--private", "--set-env", "MODEL_ID=org/model",
                       "--set-secret", "API_KEY=s3cret", "--hardware", "t4-medium")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"forked Space openenv/echo-env -> {hub.url}/spaces/bob/my-echo"
        [(source, payload)] = hub.duplicated
        assert source == "openenv/echo-env"
        assert payload["repository"] == "bob/my-echo" and payload["hardware"] == "t4-medium"
        assert payload.get("private") is True or payload.get("visibility") == "private"
        assert payload["variables"] == [{"key": "MODEL_ID", "value": "org/model"}]
        assert payload["secrets"] == [{"key": "API_KEY", "value": "s3cret"}]


def test_without_dest_the_fork_goes_to_your_account_on_free_hardware() -> None:
    with FakeHub() as hub:
        hub.spaces.add("openenv/echo-env")
        done = openenv(hub, "hf://spaces/openenv/echo-env")
        assert done.returncode == 0, done.stderr
        [(_, payload)] = hub.duplicated
        assert payload["repository"] == "alice/echo-env" and payload["hardware"] == "cpu-basic"
        assert "bob/my-echo" not in hub.spaces


def test_an_existing_dest_and_a_missing_source_are_refused() -> None:
    with FakeHub() as hub:
        hub.spaces |= {"openenv/echo-env", "bob/taken"}
        taken = openenv(hub, "openenv/echo-env", "bob/taken")
        assert taken.returncode == 2
        assert taken.stderr.strip() == ("error: Space bob/taken exists: `openenv fork` never overwrites; give DEST "
                                        "another name (or delete that Space on the Hub first).")
        missing = openenv(hub, "openenv/nothing", "bob/new")
        assert missing.returncode == 2 and "Space openenv/nothing does not exist" in missing.stderr
        bad = openenv(hub, "openenv/echo-env", "bob/new", "--set-env", "NOVALUE")
        assert bad.returncode == 2 and "write KEY=VALUE" in bad.stderr
        assert hub.duplicated == []  # nothing was asked of the Hub

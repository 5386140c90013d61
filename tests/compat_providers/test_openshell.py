"""Issue 32: the real ``openenv-openshell`` package from the index, listed and refused clearly.

Its provider needs an OpenShell gateway reached over gRPC (the ``openshell`` SDK); no stand-in of
that gateway exists here, so this checks what works without one: the adapter finds the unchanged
package (never importing it to list it), and starting it without its configuration is one error
line naming the package and the way out (docs/coming-from-openenv.md, "Still different").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("openenv_openshell", reason="openenv-openshell is installed only by `nox -s upstream_providers`")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "OPENENV_UPSTREAM_PROVIDER_KWARGS"}
    return subprocess.run([sys.executable, "-m", "openenv", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_listed_and_a_missing_configuration_is_one_line() -> None:
    listed = _cli("providers", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)["providers"]}
    assert "openenv_openshell:OpenShellProvider" in rows["openshell"]["description"]
    ran = _cli("run", "echo", "--provider", "openshell", "--episodes", "1")
    assert ran.returncode != 0
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, ran.stderr
    assert "provider 'openshell' (openenv-openshell)" in lines[0] and "--provider" in lines[0]

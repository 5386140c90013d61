"""``openenv build`` against a real engine: the echo image, its labels, rebuild skipping, the
command line, and a failing build's report."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from openenv_provider_docker.build import BuildError, build_image
from openenv_provider_docker.testing import base_image_for_tests

pytestmark = pytest.mark.docker


def test_echo_image_is_tagged_and_labelled(docker_client: Any, echo_image: str) -> None:
    image = docker_client.images.get(echo_image)
    assert echo_image == "openenv-echo:0.1.0"
    assert {"openenv-echo:0.1.0", "openenv-echo:latest"} <= set(image.tags)
    labels = image.labels
    assert labels["org.openenv.env"] == "echo"
    assert labels["org.openenv.serve"] == "1"
    assert labels["org.openenv.version"] == "0.1.0"
    config = image.attrs["Config"]
    assert config["User"] == "10001:10001"
    assert config["Cmd"][:5] == ["/opt/venv/bin/python", "-m", "openenv", "serve", "echo"]
    assert "8000/tcp" in config["ExposedPorts"]
    # The wheels were installed offline in the first stage and are not in the final image.
    out = docker_client.containers.run(echo_image, ["sh", "-c", "ls /wheels 2>&1; python -c "
                                                    "'import openenv, openenv_env_echo, openenv_transport_ws'"
                                                    " && echo imports-ok"], remove=True)
    assert b"No such file or directory" in out
    assert b"imports-ok" in out


@pytest.mark.slow_ok("a full no-cache image build (pip install of the wheels in two stages): ~30 s on an idle "
                     "2-core machine, over 60 s beside other CI work")
def test_a_build_leaves_no_untagged_stage_image(docker_client: Any, echo_image: str, echo_dir: Path) -> None:
    from openenv_provider_docker.build import stage_tag
    from openenv_provider_docker.naming import LABEL_BUILD_STAGE

    def untagged() -> set[str]:
        return {i.id for i in docker_client.images.list(filters={"label": f"{LABEL_BUILD_STAGE}=echo",
                                                                 "dangling": True})}

    base = base_image_for_tests(docker_client)
    before = untagged()  # older versions' or other checkouts' leftovers on a shared engine are not ours
    build_image(echo_dir, base_image=base, client=docker_client, console=Console(file=io.StringIO()), force=True,
                no_cache=True)
    assert untagged() - before == set()
    repository, tag = stage_tag("echo")
    assert docker_client.images.get(f"{repository}:{tag}").labels[LABEL_BUILD_STAGE] == "echo"


def test_unchanged_inputs_are_not_rebuilt(docker_client: Any, echo_image: str, echo_dir: Path) -> None:
    base = base_image_for_tests(docker_client)
    result = build_image(echo_dir, base_image=base, client=docker_client, console=Console(file=io.StringIO()))
    assert result.built is False
    assert result.image_id == docker_client.images.get(echo_image).id


def test_build_command_prints_the_tag(docker_client: Any, echo_image: str, echo_dir: Path) -> None:
    base = base_image_for_tests(docker_client)
    env = {**os.environ, "OPENENV_BASE_IMAGE": str(base)}
    done = subprocess.run([sys.executable, "-m", "openenv", "build", str(echo_dir)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == echo_image  # only the tag on stdout: TAG=$(openenv build ...)
    assert "up to date" in done.stderr


def test_build_command_refuses_a_folder_that_is_not_an_env_package(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "openenv", "build", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "has no pyproject.toml" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_failing_build_reports_the_engine_error_and_output(docker_client: Any, echo_image: str,
                                                             echo_dir: Path) -> None:
    base = base_image_for_tests(docker_client)
    with pytest.raises(BuildError) as err:
        build_image(echo_dir, base_image=base, python="python9", tag="openenv-test-broken:1",
                    client=docker_client, console=Console(file=io.StringIO()))
    message = str(err.value)
    assert "Building openenv-test-broken:1 failed" in message
    assert "python9" in message  # the failing command, from the build output's tail
    assert not docker_client.images.list(name="openenv-test-broken")

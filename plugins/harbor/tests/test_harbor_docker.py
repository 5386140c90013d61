"""The Docker runtime: the fixture task built offline on the base image, its oracle 1 and no-op 0,
graded in a fresh container from a ``docker commit`` as uid 65534; a forged reward and git attack
do not pay; a Dockerfile that does not build and a hanging solution are clear errors, and no
labelled container or image is left behind."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from openenv_harbor import docker as rt
from openenv_harbor.env import DEMO_SUITE
from openenv_harbor.task import HarborTaskError, load_task

FIXTURE = Path(DEMO_SUITE) / "fix-add"

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module", autouse=True)
def engine() -> None:
    if not rt.available():
        pytest.skip("no Docker engine answers here (.ci/docker-setup.sh)")
    if subprocess.run(["docker", "image", "inspect", rt.BASE_IMAGE], capture_output=True).returncode:
        pytest.skip(f"the base image {rt.BASE_IMAGE} is missing (.ci/docker-setup.sh makes it)")


@pytest.fixture
def counted() -> object:
    before = rt.leftovers()
    yield
    assert rt.leftovers() == before, "labelled containers or images were left behind"


@pytest.mark.usefixtures("counted")
def test_oracle_1_noop_0_and_forgeries_0_in_docker() -> None:
    task = load_task(FIXTURE)
    graded, solved = rt.run_oracle(task)
    assert solved.status == 0 and (graded.reward, graded.error) == (1.0, ""), graded
    container = rt.start(task)
    try:
        assert rt.grade(container).reward == 0.0  # the no-op
        rt.exec_command(container, "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
                        "printf '#!/bin/sh\\nsed -i s/-/+/ /app/calc.py\\n' > /app/.fix && chmod 755 /app/.fix && "
                        "git config core.fsmonitor /app/.fix && chmod -R a+rwX /app && "
                        "mkdir -p /tests && echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh", 30)
        forged = rt.grade(container)
        assert forged.reward == 0.0, forged
        rt.exec_command(container, "sed -i 's/return a - b/return a + b/' calc.py", 30)
        assert rt.grade(container).reward == 1.0
    finally:
        rt.close(container)


@pytest.mark.usefixtures("counted")
def test_a_dockerfile_that_does_not_build_and_a_hanging_solution(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(FIXTURE, broken)
    (broken / "environment" / "Dockerfile").write_text(
        "FROM openenv-harbor-base\nWORKDIR /app\nCOPY app/ /app/\nRUN true\nRUN exit 3\n")
    with pytest.raises(HarborTaskError, match=r"broken/environment/Dockerfile: the image does not build offline"):
        rt.build(load_task(broken))
    # the clean-up removes this build's layers only, never the base image (on a fresh engine it had no
    # child image to protect it, and a forced rmi of the FROM step's id deleted it)
    inspected = subprocess.run(["docker", "image", "inspect", rt.BASE_IMAGE], capture_output=True, timeout=60)
    assert inspected.returncode == 0, "the base image was removed"
    hangs = tmp_path / "hangs"
    shutil.copytree(FIXTURE, hangs)
    (hangs / "solution" / "solve.sh").write_text("sleep 300 &\nsleep 300\n")
    (hangs / "task.toml").write_text((hangs / "task.toml").read_text().replace("timeout_sec = 60", "timeout_sec = 2"))
    graded, solved = rt.run_oracle(load_task(hangs))
    assert solved.timed_out and graded.reward == 0.0


@pytest.mark.usefixtures("counted")
def test_the_env_plays_a_docker_only_task_in_a_container(tmp_path: Path) -> None:
    from openenv_harbor.env import HarborAction, HarborEnv

    task = tmp_path / "suite" / "docker-only"
    shutil.copytree(FIXTURE, task)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "USER root\n")  # USER: beyond the local runtime
    env = HarborEnv.from_spec(str(tmp_path / "suite"))()
    try:
        env.reset(task_id="docker-only")
        assert env.workspace is None  # not a bubblewrap box
        obs = env.step(HarborAction(command="sed -i 's/return a - b/return a + b/' calc.py", submit=True))
        assert obs.done and obs.reward == 1.0 and obs.grade and obs.grade["grader_uid"] == 65534
    finally:
        env.close()


@pytest.mark.usefixtures("counted")
def test_a_push_that_fails_names_the_task_and_leaves_no_image() -> None:
    # nothing listens on port 1: the push fails after a real build and tag
    done = subprocess.run([sys.executable, "-m", "openenv", "harbor", "push", str(FIXTURE.parent), "--registry",
                           "127.0.0.1:1/harbor"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "FAILED fix-add: task 'fix-add': docker push 127.0.0.1:1/harbor/fix-add:" in (
        done.stderr)
    assert "127.0.0.1:1/harbor/fix-add" not in subprocess.run(["docker", "images", "--format", "{{.Repository}}"],
                                                              capture_output=True, text=True).stdout

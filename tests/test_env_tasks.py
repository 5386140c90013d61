"""Every installed env with tasks plays a group identically (issue 27 item 3).

For each env the plugin manager finds whose class declares tasks (``openenv.tasks.tasks_of``), one
real server is started and G=3 clients reset in parallel to the same ``task_id`` with the same
``group_id``; then every member gets the same actions (chosen from member 0's observation by the
manifest's oracle, or a fixed script for envs without one) and the trajectories must match:
observations (less the manifest's ``volatile_fields``), rewards and done flags. The envs' randomness
(generators, opponents, chance, tiles) all comes from the group's seed, so any leak of ambient
randomness or shared state shows up as a difference here.

Each env also gets the control: the same task under a different ``group_id`` starts from the same
task (the id names it) and reports its own group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from openenv.client import GenericEnvClient
from openenv.manifest import Manifest, load_manifest, locate_manifest
from openenv.plugins import PluginManager
from openenv.registry import load_ref
from openenv.tasks import Task, tasks_of
from openenv.testing import live_server
from openenv.testing.env_contract import without_fields
from openenv.types import StepResult

#: Members of one group; steps each group plays (kept short: this runs for every env).
G = 3
STEPS = 3

_INSTALLED = PluginManager(strict=True)


def _declaring(name: str) -> bool:
    try:
        return tasks_of(_INSTALLED.catalog.envs.load(name)) is not None
    except Exception:  # an env whose extra dependency is missing is checked by its own tests
        return False


ENVS = [name for name in _INSTALLED.catalog.envs.names() if _declaring(name)]

#: Actions for envs whose manifest names no oracle: the same script for every member.
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "coding": [{"code": "print(sum(range(10)))"},
               {"code": "def two_sum(nums, target):\n    return (0, 1)\n", "submit": True}],
    "shell": [{"command": "ls; git status --short"}, {"command": "echo done > out.txt && cat out.txt"},
              {"command": "git log --oneline | wc -l"}],
}


def test_the_envs_that_should_have_tasks_declare_them() -> None:
    # The parametrised test below would pass vacuously if no env declared tasks.
    expected = {"2048", "atari", "chess", "coding", "connect4", "grid_world", "gymnasium", "jupyter", "maze", "miniwob",
                "mujoco", "office", "openspiel", "reasoning_gym", "shell", "sql", "sudoku", "wordle"}
    assert expected <= set(ENVS), f"no tasks declared by {sorted(expected - set(ENVS))}"


def _manifest(name: str) -> Manifest:
    ref = _INSTALLED.catalog.envs.get(name).extra.get("manifest")
    assert ref, f"{name} ships no openenv.yaml"
    return load_manifest(locate_manifest(ref))


def _task(name: str) -> Task:
    source = tasks_of(_INSTALLED.catalog.envs.load(name))
    assert source is not None
    splits = source.split_names()
    return source.task_at("test" if "test" in splits else splits[0], 0)


def _chooser(name: str, manifest: Manifest) -> Callable[[dict[str, Any], int], dict[str, Any]]:
    if manifest.oracle is not None:
        oracle = load_ref(manifest.oracle)
        return lambda obs, _: dict(oracle(obs))
    script = SCRIPTS.get(name)
    assert script is not None, f"{name} has no oracle: give it a script in SCRIPTS"
    return lambda _, step: script[min(step, len(script) - 1)]


def _full(result: StepResult[dict[str, Any]]) -> dict[str, Any]:
    """The observation as the env returned it (the oracle's input): fields, reward, done, metadata."""
    return {**result.observation, "reward": result.reward, "done": result.done, "metadata": result.metadata or {}}


def _comparable(result: StepResult[dict[str, Any]], volatile: set[str]) -> dict[str, Any]:
    return {"observation": without_fields(result.observation, volatile), "reward": result.reward,
            "done": result.done, "metadata": without_fields(result.metadata or {}, volatile)}


@pytest.mark.parametrize("name", ENVS)
async def test_a_group_plays_the_identical_episode(name: str) -> None:
    manifest = _manifest(name)
    volatile = set(manifest.volatile_fields)
    choose = _chooser(name, manifest)
    task = _task(name)
    with live_server(name, transports=["ws"]) as server:
        clients = [GenericEnvClient(server.url) for _ in range(G)]
        try:
            first = await asyncio.gather(*(c.reset(task_id=task.id, group_id=f"g-{name}") for c in clients))
            assert first[0].metadata and first[0].metadata.get("task_id") == task.id, first[0].metadata
            assert first[0].metadata.get("group_id") == f"g-{name}"
            played = [[_comparable(r, volatile)] for r in first]
            results = list(first)
            for step in range(STEPS):
                if results[0].done:
                    break
                action = choose(_full(results[0]), step)
                results = list(await asyncio.gather(*(c.step(action) for c in clients)))
                for trajectory, result in zip(played, results, strict=True):
                    trajectory.append(_comparable(result, volatile))
            for member, trajectory in enumerate(played[1:], start=1):
                for step, (want, got) in enumerate(zip(played[0], trajectory, strict=True)):
                    assert got == want, f"{name}: member {member} differs from member 0 at step {step}"
            # Another group on the same task: the same task (its id names it), its own group id.
            other = await clients[0].reset(task_id=task.id, group_id=f"other-{name}")
            assert other.metadata and other.metadata.get("task_id") == task.id
            assert other.metadata.get("group_id") == f"other-{name}"
        finally:
            await asyncio.gather(*(c.close() for c in clients))

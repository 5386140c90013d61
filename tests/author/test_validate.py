"""``openenv validate``: a set of deliberately broken envs, each failing for its own reason (never
a traceback), a good one passing, every in-repo env passing, and the manifest's own errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openenv.cli._validate_core import Report
from openenv.cli.validate_cmd import validate_target

GOOD_ENV = '''
from __future__ import annotations
import random, uuid
from typing import Any
from pydantic import Field
from openenv.env import Environment
from openenv.types import Action, Observation, State

SHARED = {"steps": 0}

class CountAction(Action):
    amount: int = Field(ge=1, le=3)

class CountObservation(Observation):
    value: int
    target: int

class CountEnv(Environment[CountAction, CountObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def __init__(self) -> None:
        self._state = State(episode_id="x", step_count=0)
        self.value, self.target = 0, 10

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> CountObservation:
        #RESET
        self.target = random.Random(seed).randint(5, 9)
        self.value = 0
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return CountObservation(value=0, target=self.target, reward=0.0, done=False)

    def step(self, action: CountAction, timeout_s: float | None = None, **kw: Any) -> CountObservation:
        #STEP
        self._state.step_count += 1
        self.value += action.amount
        done = self.value >= self.target
        reward = (1.0 if self.value == self.target else 0.0) if done else 0.0
        #REWARD
        return CountObservation(value=self.value, target=self.target, reward=reward, done=done)

    @property
    def state(self) -> State:
        #STATE
        return self._state

def oracle(obs: dict[str, Any]) -> dict[str, Any]:
    return {"amount": max(1, min(3, obs["target"] - obs["value"]))}

def weak_oracle(obs: dict[str, Any]) -> dict[str, Any]:
    return {"amount": 3}

def make() -> CountEnv:
    return CountEnv()
'''

GOOD_MANIFEST = '''spec_version: 1
name: {name}
env: "{mod}.env:CountEnv"
reward_range: [0.0, 1.0]
oracle: "{mod}.env:oracle"
oracle_margin: 0.1
max_episode_steps: 20
'''

#: case -> (edits to the env source, manifest replacement lines, the check that must fail)
CASES: dict[str, tuple[dict[str, str], dict[str, str], str]] = {
    "bad_field": ({}, {"max_episode_steps: 20": "max_episode_steps: 20\nport: 99999"}, "manifest"),
    "bad_yaml": ({}, {"reward_range: [0.0, 1.0]": "reward_range: [0.0, 1.0"}, "manifest"),
    "bad_range": ({}, {"reward_range: [0.0, 1.0]": "reward_range: [1.0, 0.0]"}, "manifest"),
    "no_range": ({}, {"reward_range: [0.0, 1.0]\n": ""}, "reward_range_declared"),
    "raises_in_reset": ({"#RESET": "raise RuntimeError('the dataset is missing')"}, {}, "random_episodes"),
    "reward_out_of_range": ({"#REWARD": "reward = 5.0 if done else reward"}, {}, "reward_in_range"),
    "not_an_env": ({}, {"env:CountEnv": "env:CountAction"}, "entry_point"),
    "missing_module": ({}, {".env:CountEnv": ".nowhere:CountEnv"}, "entry_point"),
    "no_generic_types": ({"class CountEnv(Environment[CountAction, CountObservation, State]):":
                          "class CountEnv(Environment):",
                          "def step(self, action: CountAction,": "def step(self, action,"}, {}, "types"),
    "unseeded": ({"#RESET": "self.noise = random.random()",
                  "return CountObservation(value=0": "return CountObservation(metadata={'n': self.noise}, value=0"},
                 {}, "seeded_determinism"),
    "state_drift": ({"#STATE": "self._state.step_count = 0"}, {}, "state_consistent"),
    "shared_state": ({"#STEP": "SHARED['steps'] += 1",
                      "self._state.step_count += 1": "self._state.step_count = SHARED['steps']",
                      "#RESET": "SHARED['steps'] = 0"}, {}, "parallel_sessions"),
    "shared_state_static": ({"#STEP": "SHARED['steps'] += 1"}, {}, "concurrency_flags"),
    "slow_step": ({"#STEP": "import time; time.sleep(0.05)"}, {"max_episode_steps: 20": "max_episode_steps: 20\n"
                                                               "step_budget_s: 0.01"}, "time_budget"),
    "weak_oracle": ({}, {"env:oracle": "env:weak_oracle", "oracle_margin: 0.1": "oracle_margin: 0.5"}, "oracle"),
    "undeclared_tools": ({}, {"max_episode_steps: 20": "max_episode_steps: 20\ntools: [search]"}, "tools"),
    # Only a long episode pays out of range: the oracle's one-at-a-time walk, never random's.
    "oracle_reward_out_of_range": (
        {"#REWARD": "reward = 5.0 if done and self._state.step_count >= 7 else reward",
         "def make() -> CountEnv:": "def slow_oracle(obs: dict[str, Any]) -> dict[str, Any]:\n"
                                    "    return {'amount': 1}\n\ndef make() -> CountEnv:"},
        {"env:oracle": "env:slow_oracle"}, "reward_in_range"),
    # The good env accepts a step before reset (its __init__ sets a target) and after the end
    # (done stays True); these break what such an accepted step returns.
    "malformed_before_reset": ({"#STEP": "if self._state.episode_id == 'x':\n    return "
                                         "CountObservation.model_construct(value=1, reward=0.0, done=False)"},
                               {}, "step_before_reset"),
    "bad_reward_before_reset": ({"#STEP": "if self._state.episode_id == 'x':\n"
                                          "    return CountObservation(value=1, target=10, reward=7.0, done=False)"},
                                {}, "step_before_reset"),
    "not_an_observation_before_reset": ({"#STEP": "if self._state.episode_id == 'x':\n"
                                                  "    return {'value': 1}"}, {}, "step_before_reset"),
    "un_ends_after_done": ({"#STEP": "if self.value >= self.target:\n    self.value = 0"}, {}, "step_after_done"),
    # An async env's server closes it through close_async(); this one never reaches close().
    "close_never_called": ({"    @property\n    def state(self) -> State:":
                            "    async def step_async(self, action: CountAction, timeout_s: float | None = None,\n"
                            "                         **kw: Any) -> CountObservation:\n"
                            "        return self.step(action)\n\n"
                            "    def close(self) -> None:\n"
                            "        self.released = True\n\n"
                            "    async def close_async(self) -> None:\n"
                            "        pass\n\n"
                            "    @property\n    def state(self) -> State:"}, {}, "close_called"),
    "reserved_tool_name": ({"from openenv.env import Environment":
                            "from openenv.env import Environment\nfrom openenv.tools import tool",
                            "    @property\n    def state(self) -> State:":
                            "    @tool(name='state')\n    def peek(self) -> int:\n        return self.value\n\n"
                            "    @property\n    def state(self) -> State:"}, {}, "entry_point"),
}

#: Checks a case may fail besides its own (what its one fault legitimately also breaks); every
#: other check must not fail, so each case fails for its own reason only.
ALSO_FAILS: dict[str, set[str]] = {
    # No valid manifest, so no `env:` reference and no declared range.
    **{case: {"entry_point", "reward_range_declared"} for case in ("bad_field", "bad_range", "bad_yaml")},
    "no_range": {"reward_in_range"},
    # Without an action type nothing can be played or served.
    "no_generic_types": {"schemas", "random_episodes", "oracle", "seeded_determinism", "serve"},
    # No episode can start, in-process or over the wire.
    "raises_in_reset": {"oracle", "seeded_determinism", "reset_step", "seeded_reset", "step_before_reset",
                        "step_after_done", "parallel_sessions"},
    # Every ending step pays 5.0: over the wire too, after the end too, and the oracle cannot beat it.
    "reward_out_of_range": {"reward_in_range_wire", "step_after_done", "oracle"},
    "shared_state": {"concurrency_flags"},
    "state_drift": {"parallel_sessions"},
    "unseeded": {"seeded_reset"},
}

#: Words the failing check's detail must contain (the reason, not just the check's name).
REASONS: dict[str, str] = {
    "oracle_reward_out_of_range": "rewards [5.0] lie outside",
    "malformed_before_reset": "not a valid CountObservation",
    "bad_reward_before_reset": "outside reward_range",
    "not_an_observation_before_reset": "other than an observation",
    "un_ends_after_done": "played on past its end",
    "close_never_called": "were not closed",
    "reserved_tool_name": "Tool name 'state' is reserved",
}

#: Words the failing check's fix must contain, where a generic fix would mislead.
FIXES: dict[str, str] = {
    "close_never_called": "close_async() must call self.close()",
    "reserved_tool_name": "refused the env's definition",
}


def make_env(root: Path, case: str, env_edits: dict[str, str], manifest_edits: dict[str, str]) -> Path:
    mod = f"validate_case_{case}"
    folder = root / case
    package = folder / "src" / mod
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    source = GOOD_ENV
    for old, new in env_edits.items():
        assert old in source, old
        indent = " " * 8 if old.startswith("#") else ""
        source = source.replace(old, new if not indent else new.replace("\n", "\n" + indent))
    (package / "env.py").write_text(textwrap.dedent(source), encoding="utf-8")
    manifest = GOOD_MANIFEST.format(name=case, mod=mod)
    for old, new in manifest_edits.items():
        assert old in manifest, old
        manifest = manifest.replace(old, new)
    (package / "openenv.yaml").write_text(manifest, encoding="utf-8")
    return folder


def failed(report: Report) -> dict[str, str]:
    return {c.name: f"{c.detail} | {c.fix}" for c in report.checks if c.status == "fail"}


def test_a_good_env_passes_every_check(tmp_path: Path) -> None:
    report = validate_target(str(make_env(tmp_path, "good", {}, {})))
    assert report.ok, failed(report)
    statuses = {c.name: c.status for c in report.checks}
    for name in ("manifest", "entry_point", "types", "concurrency_flags", "random_episodes", "reward_in_range",
                 "oracle", "seeded_determinism", "state_consistent", "time_budget", "step_before_reset",
                 "step_after_done", "parallel_sessions", "close_called"):
        assert statuses[name] == "pass", (name, statuses)
    assert statuses["tools"] == "n/a"
    assert all(c.detail for c in report.checks if c.status == "n/a"), "an n/a check must say why"


def test_a_factory_reference_is_validated_like_its_class(tmp_path: Path) -> None:
    report = validate_target(str(make_env(tmp_path, "factory", {}, {"env:CountEnv": "env:make"})))
    assert report.ok, failed(report)
    assert {c.name: c.status for c in report.checks}["parallel_sessions"] == "pass"


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_broken_env_fails_for_its_reason(tmp_path: Path, case: str) -> None:
    env_edits, manifest_edits, expected = CASES[case]
    report = validate_target(str(make_env(tmp_path, case, env_edits, manifest_edits)))
    problems = failed(report)
    assert not report.ok
    assert expected in problems, (expected, problems)
    assert problems.keys() - {expected} <= ALSO_FAILS.get(case, set()), problems
    check = next(c for c in report.checks if c.name == expected)
    assert check.fix, f"{expected} names no fix"
    assert "Traceback" not in check.detail
    assert REASONS.get(case, "") in check.detail, check.detail
    assert FIXES.get(case, "") in check.fix, check.fix


def test_accepted_out_of_order_steps_pass_when_well_formed(tmp_path: Path) -> None:
    """The good env accepts a step before reset and after the end (done stays True); an env that
    starts a new episode visibly after the end passes too, and so does an async env whose
    close_async() is its only close."""
    def details(report: Report) -> dict[str, tuple[str, str]]:
        return {c.name: (c.status, c.detail) for c in report.checks}

    good = details(validate_target(str(make_env(tmp_path, "good", {}, {}))))
    assert good["step_before_reset"] == ("pass", "accepted, with a valid observation and reward; the "
                                                 "session kept serving")
    assert good["step_after_done"][1].startswith("accepted, the episode stayed ended (done=True)")
    new_episode = {"#STEP": "if self.value >= self.target:\n"
                            "    self.value, self._state = 0, State(episode_id=str(uuid.uuid4()), step_count=0)"}
    report = validate_target(str(make_env(tmp_path, "auto_reset", new_episode, {})))
    assert report.ok, failed(report)
    assert details(report)["step_after_done"][1].startswith("accepted, it started a new episode")
    async_close = {"    @property\n    def state(self) -> State:":
                   "    async def step_async(self, action: CountAction, timeout_s: float | None = None,\n"
                   "                         **kw: Any) -> CountObservation:\n"
                   "        return self.step(action)\n\n"
                   "    async def close_async(self) -> None:\n"
                   "        self.released = True\n\n"
                   "    @property\n    def state(self) -> State:"}
    report = validate_target(str(make_env(tmp_path, "async_close", async_close, {})))
    assert report.ok, failed(report)
    assert details(report)["close_called"][0] == "pass"


def test_manifest_errors_name_the_line(tmp_path: Path) -> None:
    report = validate_target(str(make_env(tmp_path, "bad_field", *CASES["bad_field"][:2])))
    manifest = next(c for c in report.checks if c.name == "manifest")
    assert "'port' (line 8)" in manifest.detail, manifest.detail
    report = validate_target(str(make_env(tmp_path, "bad_yaml", *CASES["bad_yaml"][:2])))
    manifest = next(c for c in report.checks if c.name == "manifest")
    assert "not valid YAML at line" in manifest.detail, manifest.detail


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    openenv = [sys.executable, "-m", "openenv"]
    good = subprocess.run([*openenv, "validate", str(make_env(tmp_path, "good", {}, {})), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
    doc = json.loads(good.stdout)
    assert doc["schema"] == "openenv.validate/1" and doc["ok"] is True
    bad = subprocess.run([*openenv, "validate", str(make_env(tmp_path, "raises_in_reset",
                                                             *CASES["raises_in_reset"][:2]))],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert bad.returncode == 1 and "Traceback" not in bad.stdout + bad.stderr
    assert "random_episodes" in bad.stdout and "the dataset is missing" in bad.stdout
    unknown = subprocess.run([*openenv, "validate", "ech"], capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 2 and "Did you mean 'echo'" in unknown.stderr


def test_a_non_env_reference_is_named_not_a_traceback() -> None:
    report = validate_target("openenv_env_echo.models:EchoAction")
    entry = next(c for c in report.checks if c.name == "entry_point")
    assert entry.status == "fail" and "not an Environment subclass" in entry.detail


def _env_names() -> list[str]:
    from openenv.plugins import get_plugin_manager

    return sorted(get_plugin_manager().catalog.envs.names())


def test_the_in_repo_envs_are_installed() -> None:
    names = set(_env_names())
    assert len(names) >= 10 and names >= WITH_ORACLE, WITH_ORACLE - names


# One test per env: each validates in seconds, and xdist spreads them over its workers.
@pytest.mark.parametrize("name", _env_names())
def test_every_in_repo_env_passes(name: str) -> None:
    report = validate_target(name, episodes=2)
    if set(failed(report)) == {"time_budget"}:
        # The one timed check, on a machine the other test workers share: a single stalled step (a
        # 0.4 ms Atari step once took 1.09 s in CI, beside three busy workers) is not the env's. A
        # slow env is slow again: validate once more, and fail on that.
        report = validate_target(name, episodes=2)
    assert report.ok, failed(report)
    # Every env with a scripted policy declares it, so validate really plays it against random
    # (an ``n/a`` here would mean the oracle check silently stopped running).
    oracle = next(c for c in report.checks if c.name == "oracle")
    assert oracle.status == "pass" or name not in WITH_ORACLE, (oracle.status, oracle.detail)
    # The same validation's tasks check: declared tasks load and their splits' first and last tasks
    # reset the env (tests/author/test_validate_tasks.py has the check's own cases).
    tasks = next(c for c in report.checks if c.name == "tasks")
    assert tasks.status == "pass" if name in WITH_TASKS else tasks.status in ("pass", "n/a"), (tasks.status,
                                                                                              tasks.detail)


#: The in-repo envs whose manifests declare an ``oracle`` (the others have no scripted policy:
#: echo's reward is the message length, gymnasium serves arbitrary ids, coding and shell are tool envs).
WITH_ORACLE = {"2048", "chess", "connect4", "grid_world", "maze", "mujoco", "office", "openspiel", "reasoning_gym",
               "sql", "sudoku", "wordle"}


#: The in-repo envs that must declare tasks passing validate's tasks check (every other env passes
#: it or declares none).
WITH_TASKS = {"coding", "shell", "chess", "sql", "wordle", "maze"}


def test_a_url_gets_the_wire_checks_only() -> None:
    from openenv.testing import live_server
    from openenv_env_echo.env import EchoEnv

    with live_server(EchoEnv, max_sessions=2) as server:
        report = validate_target(server.url)
    names = [c.name for c in report.checks]
    assert "manifest" not in names and "random_episodes" not in names
    assert {"health", "schema", "reset_step", "seeded_reset", "parallel_sessions"} <= set(names)
    assert report.ok, failed(report)
    dead = validate_target("http://127.0.0.1:9")
    assert not dead.ok and failed(dead).keys() == {"health"}


def test_a_module_reference_is_imported_from_the_current_folder(tmp_path: Path) -> None:
    """As `serve` and `run` do: `openenv validate mymodule:CountEnv` in the folder holding mymodule.py."""
    (tmp_path / "mymodule.py").write_text(textwrap.dedent(GOOD_ENV), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "openenv", "validate", "mymodule:CountEnv", "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    doc = json.loads(done.stdout)
    status = {c["name"]: c["status"] for c in doc["checks"]}
    assert status["entry_point"] == "pass", doc
    assert status["random_episodes"] == status["reset_step"] == "pass", doc
    # what still fails is only what a bare module lacks: the manifest that declares the env's facts
    assert {name for name, s in status.items() if s == "fail"} <= {"manifest", "reward_range_declared",
                                                                  "reward_in_range"}

"""The mini-swe-agent launcher's settings and errors (mini-swe-agent itself runs in tests/gateway/test_miniswe.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from openenv_gateway.agents import miniswe

Execs = list[tuple[list[str], dict[str, str]]]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Execs:
    """mini-swe-agent reported installed, and ``exec`` recorded (argv, environment) instead of done."""
    execs: Execs = []
    real = miniswe.importlib.util.find_spec
    monkeypatch.setattr(miniswe.importlib.util, "find_spec",
                        lambda name, *a: object() if name == "minisweagent" else real(name, *a))

    def fake_exec(path: str, argv: list[str], env: dict[str, str]) -> None:
        execs.append(([path, *argv[1:]], dict(env)))

    monkeypatch.setattr(miniswe.os, "execve", fake_exec)
    return execs


def test_it_execs_mini_with_the_gateway_the_limits_and_litellm_offline(installed: Execs,
                                                                      tmp_path: Path) -> None:
    extra = tmp_path / "mine.yaml"
    extra.write_text("agent:\n  step_limit: 5\n")
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "episode-key", "OPENENV_PROMPT": "Do it",
           "OPENENV_MODEL": "tiny", "HOME": str(tmp_path)}
    assert miniswe.main(["--step-limit", "4", "--config", str(extra), "--answer-file", "answer.py"], env) == 0
    [(argv, passed)] = installed
    assert argv[:4] == [sys.executable, "-m", "minisweagent.run.mini", "--yolo"]
    joined = " ".join(argv)
    assert f"-c {miniswe.CONFIG} -c {extra} -c agent.step_limit=4" in joined
    assert "model.model_kwargs.api_base=http://127.0.0.1:9/v1" in joined and "-m openai/tiny -t Do it" in joined
    assert "episode-key" not in joined  # the key travels in the environment only
    assert passed["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and passed["MSWEA_CONFIGURED"] == "true"
    assert passed["OPENENV_ANSWER_FILE"] == "answer.py" and passed["OPENAI_API_KEY"] == "episode-key"
    assert passed["MSWEA_GLOBAL_CONFIG_DIR"] == str(tmp_path / ".mini-swe-agent")


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--step-limit", "0"], {}, "--step-limit, --retries and --command-timeout must be at least 1"),
    ([], {"OPENENV_PROMPT": "x"}, "OPENAI_BASE_URL is not set"),
    (["--config", "/nonexistent.yaml"], {}, "no such file"),
    ([], {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENENV_PROMPT": " "}, "no task"),
])
def test_bad_settings_exit_2_and_say_what_to_do(installed: Execs, args: list[str], env: dict[str, str],
                                                message: str, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert miniswe.main(args, env) == 2
    assert message in capsys.readouterr().err and installed == []


def test_without_mini_swe_agent_it_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    real = miniswe.importlib.util.find_spec
    monkeypatch.setattr(miniswe.importlib.util, "find_spec",
                        lambda name, *a: None if name == "minisweagent" else real(name, *a))
    assert miniswe.main([], {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENENV_PROMPT": "x"}) == 2
    assert "pip install 'openenvkit-gateway[miniswe]'" in capsys.readouterr().err


def test_the_preset_name_and_options_become_the_launcher() -> None:
    assert miniswe.preset_command(["mini-swe-agent", "--step-limit", "3"]) == [
        sys.executable, "-m", "openenv_gateway.agents.miniswe", "--step-limit", "3"]
    assert miniswe.preset_command(["python", "agent.py"]) is None and miniswe.preset_command([]) is None


def test_the_shipped_config_is_one_mini_swe_agent_accepts() -> None:
    pytest.importorskip("minisweagent")
    import yaml
    from minisweagent.agents.default import AgentConfig
    from minisweagent.environments.local import LocalEnvironmentConfig
    from minisweagent.models.litellm_model import LitellmModelConfig

    config: dict[str, Any] = yaml.safe_load(miniswe.CONFIG.read_text())
    agent = {k: v for k, v in config["agent"].items() if k != "agent_class"}
    assert AgentConfig(**agent).step_limit == 10 and AgentConfig(**agent).cost_limit == 0
    assert LocalEnvironmentConfig(**{k: v for k, v in config["environment"].items()
                                     if k != "environment_class"}).timeout == 30
    model = {k: v for k, v in config["model"].items() if k != "model_class"}
    assert LitellmModelConfig(model_name="openai/m", **model).cost_tracking == "ignore_errors"
    assert "{{OPENENV_ANSWER_FILE}}" in config["agent"]["instance_template"]


def test_agent_eval_names_the_extra_when_mini_swe_agent_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from openenv.cli.main import build_app

    real = miniswe.importlib.util.find_spec
    monkeypatch.setattr(miniswe.importlib.util, "find_spec",
                        lambda name, *a: None if name == "minisweagent" else real(name, *a))
    argv = ["agent-eval", "coding", "--model-url", "http://127.0.0.1:9/v1", "--agent", "mini-swe-agent --step-limit 2"]
    result = CliRunner().invoke(build_app(argv), argv)
    assert result.exit_code == 2 and "pip install 'openenvkit-gateway[miniswe]'" in result.output

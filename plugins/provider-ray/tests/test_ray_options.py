"""Options, actor names and lazy registration of the ray provider (no Ray cluster needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv_provider_ray.options import ActorName, parse_memory, parse_options


def test_actor_name_round_trips_owner_and_env() -> None:
    name = ActorName(id="ray-0123456789ab", owner="host:123:456", env="pkg.mod:Env|odd")
    assert ActorName.parse(str(name)) == name
    assert ActorName.parse("someone-elses-actor") is None
    assert ActorName.parse("openenv|x||echo") is None


@pytest.mark.parametrize(("text", "expected"), [
    ("512Mi", 512 * 1024**2), ("2g", 2 * 1024**3), ("1.5G", int(1.5 * 1024**3)), (4096, 4096),
    ("100kb", 100 * 1024),
])
def test_memory_sizes(text: object, expected: int) -> None:
    assert parse_memory(text) == expected


@pytest.mark.parametrize("bad", ["lots", "12 parsecs", -1, True])
def test_bad_memory_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="memory="):
        parse_memory(bad)


def test_unknown_option_gets_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"Unknown option 'placment'.*placement"):
        parse_options(LaunchSpec(env="echo", options={"placment": "spread"}), None)


@pytest.mark.parametrize(("options", "match"), [
    ({"placement": "scatter"}, "placement='scatter'"),
    ({"bind": "0.0.0.0"}, "bind='0.0.0.0'"),
    ({"cpus": "many"}, "cpus='many'"),
    ({"probe": "tcp"}, "Unknown probe mode"),
    ({"runtime_env": "pip"}, "runtime_env must be a dict"),
])
def test_bad_options_are_refused_before_anything_starts(options: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_options(LaunchSpec(env="echo", options=options), None)


def test_address_comes_from_options_then_provider_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert parse_options(LaunchSpec(env="echo"), None).address == "127.0.0.1:1"
    assert parse_options(LaunchSpec(env="echo"), "127.0.0.1:2").address == "127.0.0.1:2"
    spec = LaunchSpec(env="echo", options={"address": "127.0.0.1:3"})
    assert parse_options(spec, "127.0.0.1:2").address == "127.0.0.1:3"
    monkeypatch.delenv("RAY_ADDRESS")
    assert parse_options(LaunchSpec(env="echo"), None).address is None


DUMP = """
import atexit, json, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["openenv", *sys.argv[2:]]
runpy.run_module("openenv", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("args", [["--help"], ["plugins", "list", "--json"], ["providers", "list", "--json"]])
def test_cli_listings_never_import_ray(args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", DUMP, str(out), *args], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "COLUMNS": "200", "OPENENV_NO_CLI_CACHE": "1"})
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(out.read_text()))
    assert "openenv_provider_ray.plugin" in modules  # it was discovered...
    leaked = sorted(m for m in modules if m == "ray" or m.startswith("ray.")
                    or m in {"openenv_provider_ray.provider", "openenv_provider_ray.actor"})
    assert leaked == []  # ...without importing Ray or the provider
    if args[0] == "providers":
        assert "ray" in done.stdout

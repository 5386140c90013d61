"""``collect(..., replicas=N)``: episodes spread over N local servers behind an ``EnvPool``; a replica
that dies mid-run loses only attempts (retried on the others)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.errors import ConfigError
from openenv_rollouts import collect, read_records

COUNT = "count_env:CountEnv"

pytestmark = [pytest.mark.usefixtures("no_leftover_processes"),
              pytest.mark.requires_plugins("provider-local", "transport-ws")]


def test_two_replicas_record_every_episode(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=8, concurrency=4, replicas=2, output=out, policy="policies_for_tests:two")
    records = list(read_records(out))
    assert (summary.episodes, summary.ok, summary.errors, summary.restarts) == (8, 8, 0, 0)
    assert sorted(r["episode"] for r in records) == list(range(8))
    assert all(r["num_steps"] == 3 and r["attempts"] == 1 for r in records)


def test_a_replica_killed_mid_run_loses_only_attempts_and_the_run_finishes(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "crashed-once"
    monkeypatch.setenv("COUNT_ENV_CRASH", str(marker))  # the first server to reach step 2 exits
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=8, concurrency=4, replicas=2, output=out, policy="policies_for_tests:two",
                      retries=1)
    records = list(read_records(out))
    assert marker.exists()
    assert (summary.episodes, summary.ok, summary.errors) == (8, 8, 0)
    assert sorted(r["episode"] for r in records) == list(range(8))
    # The episodes of the dead replica failed once and finished on a live one.
    assert any(r["attempts"] == 2 for r in records)
    assert summary.restarts <= 1


def test_replicas_with_a_base_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--replicas starts servers through a provider"):
        collect(COUNT, episodes=1, replicas=2, base_url="http://127.0.0.1:9", output=tmp_path / "r.jsonl")


def test_eval_over_two_replicas_plays_every_task_k_times(tmp_path: Path, openenv_cli, cli_env) -> None:
    """``openenv eval --replicas 2``: the CLI flag reaches the pool; every (task, sample) is recorded once."""
    out = tmp_path / "run"
    proc = openenv_cli("eval", "target_env:TargetEnv", "--split", "test", "-k", "2", "-c", "4", "--replicas", "2",
                       "--policy", "policies_for_tests:one", "-o", str(out), "--no-report", "-q",
                       env={**cli_env, "PYTHONPATH": str(Path(__file__).parent)}, timeout=180)
    assert proc.returncode == 0, proc.stderr
    records = list(read_records(out / "rollouts.jsonl"))
    assert sorted(r["key"] for r in records) == sorted(f"test-{i}#{s}" for i in range(6) for s in range(2))
    assert all(r["status"] == "ok" for r in records)


@pytest.mark.parametrize("replicas", [1, 2])
def test_provider_options_reach_every_server_the_provider_starts(tmp_path: Path, replicas: int) -> None:
    """``--provider-option``/``provider_options=``: the provider checks them (here: an unknown one)."""
    with pytest.raises(ConfigError, match="Unknown option 'cpuz' for provider 'local'"):
        collect(COUNT, episodes=1, replicas=replicas, provider_options={"cpuz": 1}, output=tmp_path / "r.jsonl")
    summary = collect(COUNT, episodes=2, replicas=replicas, provider_options={"log_level": "warning"},
                      output=tmp_path / "ok.jsonl", policy="policies_for_tests:two")
    assert summary.ok == 2


WALK = "walk_crash:CrashWalk"


def _trajectories(path: Path) -> dict[int, list[tuple[object, object, object]]]:
    return {r["episode"]: [(s["observation"], s["action"], s["reward"]) for s in r["steps"]]
            for r in read_records(path)}


def test_a_crashed_episode_continues_from_its_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--checkpoint-every: the server dies at step 5 of an episode; the retry restores the step-4
    snapshot on the restarted server instead of replaying the first steps, and the episode's record
    is the same as in a run where nothing died."""
    reference = collect(WALK, episodes=2, concurrency=1, seed=5, output=tmp_path / "ref.jsonl")
    assert reference.ok == 2 and reference.resumed == 0
    marker = tmp_path / "crashed"
    monkeypatch.setenv("WALK_CRASH", str(marker))
    out = tmp_path / "run.jsonl"
    summary = collect(WALK, episodes=2, concurrency=1, seed=5, output=out, retries=1, checkpoint_every=2)
    assert marker.exists() and summary.ok == 2 and summary.resumed == 1
    assert _trajectories(out) == _trajectories(tmp_path / "ref.jsonl")
    assert sorted(r["attempts"] for r in read_records(out)) == [1, 2]
    assert not list(Path(str(out) + ".checkpoints").glob("*.json"))  # finished episodes leave none


def test_checkpoints_turn_off_for_an_env_without_snapshots(tmp_path: Path) -> None:
    summary = collect(COUNT, episodes=2, output=tmp_path / "r.jsonl", policy="policies_for_tests:two",
                      checkpoint_every=1)
    assert summary.ok == 2 and summary.resumed == 0
    with pytest.raises(ConfigError, match="checkpoint_every"):
        collect(COUNT, episodes=1, output=tmp_path / "x.jsonl", checkpoint_every=-1)


def test_resume_after_the_collection_was_killed_continues_from_the_checkpoint(tmp_path: Path, openenv_cli,
                                                                             cli_env) -> None:
    """`collect` SIGKILLed mid-episode (no record of it written), then `--resume`: the episode goes
    on from its checkpoint and its record matches a run where nothing died."""
    env = {**cli_env, "PYTHONPATH": str(Path(__file__).parent)}
    args = ["collect", WALK, "-n", "2", "-c", "1", "--seed", "5", "-q", "--checkpoint-every", "2"]
    reference = openenv_cli(*args[:-2], "-o", str(tmp_path / "ref.jsonl"), env=env, timeout=120)
    assert reference.returncode == 0, reference.stderr
    out, marker = tmp_path / "run.jsonl", tmp_path / "killed"
    killed = openenv_cli(*args, "-o", str(out), env={**env, "WALK_KILL_PARENT": str(marker)}, timeout=120)
    assert marker.exists() and killed.returncode != 0
    assert len(list(read_records(out))) < 2 and list(Path(str(out) + ".checkpoints").glob("*.json"))
    resumed = openenv_cli(*args, "-o", str(out), "--resume", "--json", env=env, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert '"resumed": 1' in resumed.stdout.replace(" ", "").replace('"resumed":1', '"resumed": 1')
    assert _trajectories(out) == _trajectories(tmp_path / "ref.jsonl")


def test_the_pools_metrics_are_served_during_the_run_and_closed_after(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``collect(..., replicas=2, metrics_port=P)`` (the CLI's ``--metrics-port``): scraped while
    episodes finish, read with prometheus-client's parser; nothing listens there after the run."""
    import urllib.error
    import urllib.request

    pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families

    from openenv.testing import free_port

    monkeypatch.setenv("OPENENV_TOKEN", "scrape-me")
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    scrapes: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []

    def scrape(_record: object) -> None:  # runs as each episode finishes, while the pool is up
        request = urllib.request.Request(url, headers={"Authorization": "Bearer scrape-me"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            scrapes.append({(s.name, tuple(sorted(s.labels.items()))): s.value
                            for family in text_string_to_metric_families(answer.read().decode())
                            for s in family.samples})

    summary = collect(COUNT, episodes=6, concurrency=2, replicas=2, output=tmp_path / "r.jsonl",
                      policy="policies_for_tests:two", metrics_port=port, on_episode=scrape)
    assert summary.ok == 6 and len(scrapes) == 6
    last = scrapes[-1]
    assert last[("openenv_pool_launches_total", ())] == 2
    assert sum(v for (name, _), v in last.items() if name == "openenv_pool_replicas") == 2
    placed = [v for (name, _), v in last.items() if name == "openenv_pool_placements_total"]
    # Each of the 2 workers keeps one session for its episodes: one placed on each replica.
    assert sorted(placed) == [1.0, 1.0]
    open_sessions = [[v for (name, _), v in m.items() if name == "openenv_pool_sessions"] for m in scrapes]
    assert all(len(per_replica) == 2 and sum(per_replica) <= 2 for per_replica in open_sessions)
    assert last[("openenv_pool_replicas_lost_total", ())] == 0
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


def test_metrics_port_without_replicas_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--metrics-port serves the metrics of the pool"):
        collect(COUNT, episodes=1, metrics_port=9, output=tmp_path / "r.jsonl")


def test_cli_metrics_port_without_replicas_names_the_fix(tmp_path: Path, openenv_cli, cli_env) -> None:
    proc = openenv_cli("collect", COUNT, "-n", "1", "--metrics-port", "9", "-o", str(tmp_path / "r.jsonl"), "-q",
                       env={**cli_env, "PYTHONPATH": str(Path(__file__).parent)}, timeout=120)
    assert proc.returncode != 0
    assert "--metrics-port" in proc.stderr and "--replicas" in proc.stderr

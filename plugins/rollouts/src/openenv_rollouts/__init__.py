"""openenvkit-rollouts: collect rollouts of any OpenEnv env into datasets, and adapt envs to trainers.

``collect(env, episodes=..., concurrency=..., output=...)`` / ``openenv collect ENV`` write one
JSONL record per episode (schema ``openenv.rollout/3``, see the README); ``to_parquet`` turns the
file into Parquet that ``datasets.load_dataset("parquet", ...)`` loads; ``write_report`` draws it.
Adapters: ``openenv_rollouts.gym`` (Gymnasium, extra ``[gym]``) and ``openenv_rollouts.trl``
(TRL's ``GRPOTrainer``, extra ``[trl]``). ``evaluate(env, split=..., k=...)`` / ``openenv eval``
measure a policy on a split of the env's tasks; ``make_sampler`` draws training tasks.
"""

from __future__ import annotations

from openenv.lazy import lazy_exports

#: name -> module; resolved on first use, so loading the plugin (``openenv --help``) imports nothing heavy.
_EXPORTS = {
    "CollectSummary": "collect", "collect": "collect", "collect_async": "collect", "episode_key": "collect",
    "load_tasks": "collect", "EpisodeContext": "policies", "PolicyError": "policies", "make_policy": "policies",
    "SCHEMA": "records", "EpisodeRecord": "records", "StepRecord": "records", "read_records": "records",
    "repair": "records", "READABLE_SCHEMAS": "records", "Decision": "policies", "evaluate": "eval",
    "evaluate_async": "eval", "make_sampler": "sampler", "TaskSampler": "sampler", "pass_at_k": "evalstats",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, {name: f".{module}" for name, module in _EXPORTS.items()})

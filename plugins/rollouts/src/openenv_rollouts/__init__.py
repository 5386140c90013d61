"""openenvkit-rollouts: collect rollouts of any OpenEnv env into datasets, and adapt envs to trainers.

``collect(env, episodes=..., concurrency=..., output=...)`` / ``openenv collect ENV`` write one
JSONL record per episode (schema ``openenv.rollout/1``, see the README); ``to_parquet`` turns the
file into Parquet that ``datasets.load_dataset("parquet", ...)`` loads; ``write_report`` draws it.
Adapters: ``openenv_rollouts.gym`` (Gymnasium, extra ``[gym]``) and ``openenv_rollouts.trl``
(TRL's ``GRPOTrainer``, extra ``[trl]``).
"""

from __future__ import annotations

from openenv_rollouts.collect import CollectSummary, collect, collect_async, episode_key, load_tasks
from openenv_rollouts.policies import EpisodeContext, PolicyError, make_policy
from openenv_rollouts.records import SCHEMA, EpisodeRecord, StepRecord, read_records, repair

__all__ = ["SCHEMA", "CollectSummary", "EpisodeContext", "EpisodeRecord", "PolicyError", "StepRecord", "collect",
           "collect_async", "episode_key", "load_tasks", "make_policy", "read_records", "repair"]

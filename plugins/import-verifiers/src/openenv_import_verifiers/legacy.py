"""verifiers' old API: a module with ``load_environment(**kwargs)`` returning a ``vf.Environment``.

Every environment published on the index for verifiers before 0.4 is written this way: the module's
``load_environment`` builds a ``vf.SingleTurnEnv(dataset=..., eval_dataset=..., system_prompt=...,
parser=..., rubric=vf.Rubric(funcs=[...], weights=[...]))``. ``LegacyHandle.load`` calls it and
keeps the env; its formatted datasets (the system prompt and few-shot already in each row's
``prompt``, as verifiers formats them) are the tasks, and ``score`` scores a reply the way
verifiers' own rollout does: the env's ``init_state`` on the row, the reply as the completion
(an assistant message for a chat env, text for a completion env) and the env's rubric's
``score_group`` (each reward function with its weight, the rubric's parser among its arguments).

Which verifiers is installed decides the path: verifiers 0.4 ships only ``verifiers.v1`` and no
``SingleTurnEnv``, so a ``load_environment`` module needs a venv of its own with verifiers 0.1
(tested: 0.1.9.post3, ``nox -s verifiers_legacy``). Single-turn only: a multi-turn env is refused.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from openenv_import_verifiers.taskset import Scored, VerifiersImportError, _import_module, _one_line

__all__ = ["LEGACY_PIN", "LegacyHandle", "has_load_environment", "parse_args"]

#: The verifiers release the old-API path is tested with (``nox -s verifiers_legacy``).
LEGACY_PIN = "0.1.9.post3"


def has_load_environment(module: str) -> bool:
    """Whether ``module`` (imported here) has verifiers' old ``load_environment`` entry point."""
    return callable(getattr(_import_module(module), "load_environment", None))


def parse_args(pairs: list[str]) -> dict[str, Any]:
    """``--arg key=value`` options as ``load_environment`` keyword arguments: a value that reads as
    JSON (``3``, ``true``, ``["a"]``) is that value, any other is the text."""
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise VerifiersImportError(f"--arg {pair!r} is not KEY=VALUE with a Python name as KEY, "
                                       "e.g. --arg num_examples=20")
        try:
            args[key] = json.loads(value)
        except ValueError:
            args[key] = value
    return args


def _old_verifiers(module: str) -> Any:
    try:
        vf = importlib.import_module("verifiers")
    except ImportError:
        vf = None
    if vf is None or getattr(vf, "SingleTurnEnv", None) is None:
        found = getattr(vf, "__version__", None) if vf is not None else None
        here = f"verifiers {found} (installed here)" if found else "the verifiers installed here (none)"
        raise VerifiersImportError(
            f"module {module!r} has verifiers' old load_environment() API, which {here} does not run: import "
            f"it in a venv with verifiers 0.1 (`pip install 'verifiers=={LEGACY_PIN}'`), "
            "or port it to a vf.Taskset subclass exported in __all__ (verifiers 0.4's v1 guide)")
    # verifiers logs at INFO to stderr and datasets draws progress bars: an import prints one line
    # (and huggingface_hub warns on each retry of an unreachable Hub before the error says so)
    logging.getLogger("verifiers").setLevel(logging.WARNING)
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    with contextlib.suppress(ImportError, AttributeError):
        importlib.import_module("datasets").disable_progress_bars()
    return vf


class LegacyHandle:
    """A ``load_environment`` module, loaded: the ``vf.SingleTurnEnv`` it returned."""

    def __init__(self, module: str, args: dict[str, Any], env: Any) -> None:
        self.module, self.args, self.env = module, args, env

    @classmethod
    def load(cls, module: str, args: Mapping[str, Any] | None = None) -> LegacyHandle:
        vf = _old_verifiers(module)
        load = getattr(_import_module(module), "load_environment", None)
        if not callable(load):
            raise VerifiersImportError(f"module {module!r} has no load_environment(): an old-API verifiers "
                                       "environment module defines load_environment(**kwargs) -> vf.Environment")
        kwargs = dict(args or {})
        shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        try:
            env = load(**kwargs)
        except Exception as exc:  # the env's own code: its words, on one line
            hint = _hub_hint(exc)
            raise VerifiersImportError(f"{module}.load_environment({shown}) failed: {_one_line(exc)}{hint}") from exc
        if not isinstance(env, vf.Environment):
            raise VerifiersImportError(f"{module}.load_environment() returned {type(env).__name__}, not a "
                                       "vf.Environment: it must return the env (e.g. vf.SingleTurnEnv(...))")
        if not isinstance(env, vf.SingleTurnEnv):
            raise VerifiersImportError(
                f"{module}.load_environment() returned a {type(env).__name__}, a multi-turn verifiers env (env "
                "responses or tool calls between turns): an imported env serves one reply per task, so only "
                "vf.SingleTurnEnv environments import")
        return cls(module, kwargs, env)

    def rows(self, limit: int, test_fraction: float) -> list[dict[str, Any]]:
        """``{id, split, data}`` per dataset row: the env's ``dataset`` is ``train`` and its
        ``eval_dataset`` ``test``; an env with one of them splits it (its last ``test_fraction``
        rows ``test``). ``data`` is the formatted row (``prompt``, ``answer``, ``info``, ...)."""
        train = _records(getattr(self.env, "dataset", None), limit)
        test = _records(getattr(self.env, "eval_dataset", None), limit)
        if not train and not test:
            raise VerifiersImportError(f"{self.module}.load_environment() gave an env with no dataset rows: an env "
                                       "needs at least one")
        if not (train and test):
            rows = train or test
            cut = len(rows) - (math.ceil(len(rows) * test_fraction) if len(rows) > 1 else 0)
            train, test = rows[:cut], rows[cut:]
        out: list[dict[str, Any]] = []
        for split, records in (("train", train), ("test", test)):
            for i, record in enumerate(records):
                if record.get("prompt") in (None, "", []):
                    raise VerifiersImportError(f"{split} row {i} of {self.module} has no prompt: every row needs a "
                                               "'prompt' (text or chat messages) for the agent to answer")
                try:
                    data = json.loads(json.dumps(record))
                except (TypeError, ValueError) as exc:
                    raise VerifiersImportError(f"{split} row {i} of {self.module} is not JSON ({exc}): an imported "
                                               "env stores its rows as JSON") from None
                out.append({"id": f"{split}-{i}", "split": split, "data": data})
        return out

    def reward_range(self) -> tuple[float, float] | None:
        """The rubric's weights summed by sign (each reward function taken to score in [0, 1]);
        None where a judge scores (its range is its own) or there are no weights."""
        weights = [float(w) for w in self.env.rubric._get_reward_weights()]
        judge = getattr(importlib.import_module("verifiers"), "JudgeRubric", None)
        if not weights or (judge is not None and any(isinstance(r, judge) for r in _leaves(self.env.rubric))):
            return None
        return float(sum(w for w in weights if w < 0)), float(sum(w for w in weights if w > 0))

    @property
    def message_type(self) -> str:
        return str(getattr(self.env, "message_type", "chat") or "chat")

    async def score(self, data: dict[str, Any], completion: str) -> Scored:
        """Score ``completion`` as the reply to ``data``'s prompt, with the env's rubric: the state
        the env's rollout would hold after one turn (``init_state``, the reply as the completion and
        as the one trajectory step), scored by ``rubric.score_group`` as verifiers scores a rollout."""
        state = await self.env.init_state(input=dict(data), client=None, model="openenv-import")
        reply: Any = ([{"role": "assistant", "content": completion}] if self.message_type == "chat"
                      else completion)
        state["completion"] = reply
        state["trajectory"] = [{"prompt": state["prompt"], "completion": reply, "response": None, "tokens": None,
                                "reward": None, "advantage": None}]
        rubric = self.env.rubric
        if "score_sem" in inspect.signature(rubric.score_group).parameters:
            await rubric.score_group([state], score_sem=contextlib.nullcontext())
        else:
            await rubric.score_group([state])
        weights: dict[str, float] = {}
        for fname, weight in zip(rubric._get_reward_func_names(), rubric._get_reward_weights(), strict=False):
            weights[str(fname)] = weights.get(str(fname), 0.0) + float(weight)
        metrics = {str(k): float(v) for k, v in (state.get("metrics") or {}).items() if _is_number(v)}
        rewards = {k: v * weights[k] for k, v in metrics.items() if weights.get(k)}
        return Scored(reward=float(state.get("reward") or 0.0), rewards=rewards,
                      metrics={k: v for k, v in metrics.items() if not weights.get(k)})


def _leaves(rubric: Any) -> list[Any]:
    subs = getattr(rubric, "rubrics", None)
    return [leaf for r in subs for leaf in _leaves(r)] if isinstance(subs, list) else [rubric]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _records(dataset: Any, limit: int) -> list[dict[str, Any]]:
    if dataset is None:
        return []
    rows = dataset.select(range(min(limit, len(dataset)))) if hasattr(dataset, "select") else list(dataset)[:limit]
    return [dict(r) for r in rows]


def _hub_hint(exc: BaseException) -> str:
    """A note for the usual cause of a dataset that cannot load here: the Hugging Face Hub."""
    text = f"{type(exc).__name__} {exc}".lower()
    if re.search(r"huggingface|\bhub\b|offlinemodeisenabled|hf_hub_offline", text):
        return (" (its dataset comes from the Hugging Face Hub, which is not reachable from here: import it where "
                "the Hub is, or pass a dataset the package builds, e.g. with --arg)")
    return ""

"""TRL adapter: what ``trl.GRPOTrainer`` takes, generated from any served or installed env.

``environment_class(env)`` (or ``base_url=``) builds an ``environment_factory`` class:

* groups: TRL repeats each prompt's row ``num_generations`` times and calls ``reset(**row)`` on one
  instance per completion. A row with a ``task_id`` column resets that server task, and every
  completion of the prompt gets the same ``group_id`` (the row's own, else one derived from the
  task and the prompt), so the whole GRPO group plays the identical episode. ``task_rows(tasks)``
  builds such rows (``group_id`` from the prompt's index);
* its public methods are the env's tools — one per MCP tool, or for other envs one method ``step``
  whose keyword arguments are the action's fields — with typed signatures (``Literal`` for
  choices) and Google-style docstrings taken from the schemas, so TRL renders them as tools;
* ``reset(**row) -> str`` resets a session with the dataset row as reset keywords (TRL's own
  ``prompt`` column is left out) and returns the observation as text, which TRL appends to the prompt;
* ``reward`` (the episode's summed reward so far) and ``get_reward()`` expose the episode reward:
  TRL calls ``get_reward`` by itself; ``episode_reward`` is the same as a ``reward_funcs`` entry.

Each instance holds its own session; the class starts one server (through a provider, ``local``
by default) on first use and shares it. ``rollout_func(env_class)`` makes a multi-turn
``rollout_func`` for trainers that do not use TRL's tool loop.

Install with the extra: ``pip install 'openenvkit-rollouts[trl]'`` (and torch).
"""

from __future__ import annotations

import inspect
import json
import re
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from openenv_rollouts.envinfo import fetch_schema, is_mcp_schema

__all__ = ["OpenEnvToolEnv", "environment_class", "episode_reward", "reset_kwargs", "rollout_func", "task_rows"]

_PY_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                             "object": dict}
_NOT_RESET = {"prompt", "completion", "images", "environment"}


def reset_kwargs(row: dict[str, Any]) -> dict[str, Any]:
    """The reset keywords of a dataset row: TRL's own columns left out; a row naming a ``task_id``
    without a ``group_id`` gets one derived from the task and the prompt, the same for every
    completion of that prompt (TRL passes them identical rows), so a group shares its episode."""
    kwargs = {k: v for k, v in row.items() if k not in _NOT_RESET}
    if kwargs.get("task_id") is not None and kwargs.get("group_id") is None:
        import zlib

        prompt = json.dumps(row.get("prompt"), sort_keys=True, default=str)
        kwargs["group_id"] = f"trl-{kwargs['task_id']}-{zlib.crc32(prompt.encode()):08x}"
    return kwargs


def task_rows(tasks: list[Any], prompt: Any = "Solve the task.") -> list[dict[str, Any]]:
    """Dataset rows for ``GRPOTrainer``, one per task (``openenv.tasks.Task`` objects or ids):
    ``prompt`` (the same for every task: a string or a list of chat messages; or a function of the
    task), ``task_id``, and ``group_id`` from the row's index."""
    rows = []
    for index, task in enumerate(tasks):
        tid = str(getattr(task, "id", task))
        text = prompt(task) if callable(prompt) else prompt
        rows.append({"prompt": text, "task_id": tid, "group_id": f"p{index:06d}-{tid}"})
    return rows


def _text(observation: Any) -> str:
    if isinstance(observation, dict):
        observation = {k: v for k, v in observation.items() if k not in ("metadata", "reward", "done") or v}
    return json.dumps(observation, separators=(",", ":"), default=str)


def _annotation(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        schema = {**defs.get(ref.rsplit("/", 1)[-1], {}), **schema}
    choices = schema.get("enum") or ([schema["const"]] if "const" in schema else None)
    if choices and all(isinstance(c, str | int | bool) for c in choices):
        return Literal[tuple(choices)]  # type: ignore[valid-type]
    return _PY_TYPES.get(str(schema.get("type")), str)


class OpenEnvToolEnv:
    """Base of the generated classes: one env session per instance, a shared server per class."""

    env_name: ClassVar[str | None] = None
    base_url: ClassVar[str | None] = None
    provider: ClassVar[str | None] = None
    token: ClassVar[str | None] = None
    max_sessions: ClassVar[int] = 64
    #: Servers the provider starts; above 1 they sit behind an ``openenv.EnvPool`` and each
    #: instance's session goes to the least-loaded healthy one (a dead one is replaced).
    replicas: ClassVar[int] = 1
    schema: ClassVar[dict[str, Any]] = {}
    tools: ClassVar[list[dict[str, Any]]] = []
    _handle: ClassVar[Any] = None
    _pool: ClassVar[Any] = None
    _start_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        from openenv.client import GenericEnvClient

        cls = type(self)
        cls._ensure_server()
        self._lease: Any = None
        if cls._pool is not None:
            self._lease = cls._pool.session()
            self._client = self._lease.__enter__()
        else:
            self._client = GenericEnvClient(cls.base_url, token=cls.token).sync()
        self.reward = 0.0
        self.done = False
        self.steps = 0

    @classmethod
    def _ensure_server(cls) -> None:
        with cls._start_lock:
            if cls.base_url is not None:
                return
            import secrets

            from openenv.interfaces import LaunchSpec
            from openenv.plugins import get_plugin_manager

            pm = get_plugin_manager()
            name = pm.choose_provider(str(cls.env_name), cls.provider)
            token = secrets.token_urlsafe(24)
            spec = LaunchSpec(env=str(cls.env_name), max_sessions=cls.max_sessions, token=token)
            if cls.replicas > 1:
                from openenv.pool import EnvPool

                cls._pool = EnvPool(provider=name, replicas=cls.replicas, launch=spec).sync().start()
                cls.base_url, cls.token = cls._pool.replicas()[0].url, token
                return
            cls._handle = pm.catalog.providers.load(name)().start(spec)
            cls.base_url, cls.token = cls._handle.base_url, token

    @classmethod
    def shutdown(cls) -> None:
        """Stop the server(s) the class started (if it started any)."""
        if cls._pool is not None:
            cls._pool.close()
            cls._pool, cls.base_url, cls.token = None, None, None
        if cls._handle is not None:
            cls._handle.stop()
            cls._handle, cls.base_url, cls.token = None, None, None

    def reset(self, **row: Any) -> str:
        result = self._client.reset(**reset_kwargs(row))
        self.reward, self.done, self.steps = float(result.reward or 0.0), bool(result.done), 0
        return _text(result.observation)

    def get_reward(self) -> float:
        return self.reward

    def _act(self, action: dict[str, Any]) -> str:
        if self.done:
            return "The episode is over; no more actions are accepted."
        from openenv.errors import ValidationError

        try:
            result = self._client.step(action)
        except ValidationError as exc:
            return f"Invalid action: {exc}"
        self.steps += 1
        self.reward += float(result.reward or 0.0)
        self.done = bool(result.done)
        obs = result.observation
        if isinstance(obs, dict) and "result" in obs and "tool_name" in obs:  # an MCP tool's answer
            return obs["error"]["message"] if obs.get("error") else json.dumps(obs["result"], default=str)
        return _text(obs) + (" (episode over)" if self.done else "")

    def _close(self) -> None:
        """Close this instance's session (private: TRL turns every public method into a tool)."""
        if self._lease is not None:
            lease, self._lease = self._lease, None
            lease.__exit__(None, None, None)  # ends the session and frees its place in the pool
        else:
            self._client.close()


def _method(name: str, doc: str, params: list[inspect.Parameter], build: Callable[[dict[str, Any]], dict[str, Any]]
            ) -> Callable[..., str]:
    def method(self: OpenEnvToolEnv, **kwargs: Any) -> str:
        return self._act(build(kwargs))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    sig = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *params],
                            return_annotation=str)
    method.__signature__ = sig  # type: ignore[attr-defined]
    method.__annotations__ = {**{p.name: p.annotation for p in params}, "return": str}
    return method


def _doc(summary: str, props: dict[str, Any], required: set[str]) -> tuple[str, list[inspect.Parameter], dict]:
    defs: dict[str, Any] = {}
    lines = [summary.strip() or "Act in the environment.", "", "Args:"]
    params = []
    for pname, prop in props.items():
        if pname == "metadata" or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", pname):
            continue
        ann = _annotation(prop, defs)
        default = inspect.Parameter.empty if pname in required else prop.get("default")
        params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann))
        lines.append(f"    {pname}: {(prop.get('description') or prop.get('title') or pname).strip()}")
    lines += ["", "Returns:", "    What the environment answered."]
    if len(lines) == 6:  # no arguments
        lines = [lines[0], "", "Returns:", "    What the environment answered."]
    return "\n".join(lines), params, defs


def _tool_call_builder(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def build(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"type": "call_tool", "tool_name": name, "arguments": arguments}

    return build


def environment_class(env: str | None = None, *, base_url: str | None = None, provider: str | None = None,
                      token: str | None = None, max_sessions: int = 64, replicas: int = 1) -> type[OpenEnvToolEnv]:
    """The ``environment_factory`` class for ``env`` (started on first use) or an env at ``base_url``.

    ``replicas=N`` starts N servers through the provider behind an ``openenv.EnvPool``; each
    instance's session goes to the least-loaded healthy server, each server holding
    ``max_sessions``."""
    from openenv.errors import ConfigError

    if not env and not base_url:
        raise ConfigError("environment_class needs an env name or base_url=.")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"replicas must be an integer >= 1, got {replicas!r}.")
    if replicas > 1 and base_url:
        raise ConfigError("replicas= starts servers through a provider; it cannot be combined with base_url= "
                          "(for servers you run yourself, put an openenv.EnvPool(urls=[...]) in front of them).")
    attrs: dict[str, Any] = {"env_name": env, "base_url": base_url, "provider": provider, "token": token,
                             "max_sessions": max_sessions, "replicas": replicas, "_start_lock": threading.Lock(),
                             "_handle": None, "_pool": None}
    cls_name = re.sub(r"\W", "", (env or "Served").title().replace("_", "")) + "ToolEnv"
    cls: type[OpenEnvToolEnv] = type(cls_name, (OpenEnvToolEnv,), attrs)
    cls._ensure_server()  # the schema (and tools) decide the methods
    schema = fetch_schema(str(cls.base_url), cls.token)
    cls.schema = schema
    action = schema["action"]
    if is_mcp_schema(action):
        probe = cls()
        try:
            probe._client.reset()
            listing = probe._client.step({"type": "list_tools"}).observation
        finally:
            probe._close()
        cls.tools = [t for t in listing.get("tools") or [] if isinstance(t, dict)]
        for tool in cls.tools:
            input_schema = tool.get("input_schema") or {}
            doc, params, _ = _doc(tool.get("description", ""), input_schema.get("properties") or {},
                                  set(input_schema.get("required") or []))
            tool_name = str(tool["name"])
            setattr(cls, tool_name, _method(tool_name, doc, params, _tool_call_builder(tool_name)))
    else:
        doc, params, _ = _doc(action.get("description") or f"Take one action ({action.get('title', 'action')}).",
                              action.get("properties") or {}, set(action.get("required") or []))
        cls.step = _method("step", doc, params, dict)  # type: ignore[attr-defined]
    return cls


def episode_reward(environments: list[OpenEnvToolEnv], **kwargs: Any) -> list[float]:
    """A ``reward_funcs`` entry: each rollout's episode reward (TRL passes ``environments``)."""
    return [e.reward for e in environments]


def rollout_func(env_class: type[OpenEnvToolEnv], *, max_turns: int = 3) -> Callable[[list[Any], Any], dict[str, Any]]:
    """A multi-turn ``rollout_func(prompts, trainer)``: per prompt, reset an env, then up to
    ``max_turns`` times generate with the trainer's model, parse a JSON action from the text, step,
    and append the env's answer (masked out of the loss with ``env_mask``). Returns
    ``prompt_ids``, ``completion_ids``, ``logprobs``, ``env_mask`` and ``env_reward``."""
    from openenv_rollouts.llm import parse_json_action
    from openenv_rollouts.policies import PolicyError

    def run(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        import torch

        tok = trainer.processing_class
        model = trainer.model
        max_new = int(getattr(trainer, "max_completion_length", None) or 32)
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                     "env_reward": []}
        for prompt in prompts:
            env = env_class()
            try:
                first = env.reset()
                messages = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
                messages[-1] = {**messages[-1], "content": str(messages[-1]["content"]) + first}
                prompt_ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                     return_dict=False)
                completion, logprobs, mask = [], [], []
                context = list(prompt_ids)
                for _ in range(max_turns):
                    with torch.no_grad():
                        gen = model.generate(torch.tensor([context]), max_new_tokens=max_new, do_sample=True,
                                             output_scores=True, return_dict_in_generate=True,
                                             pad_token_id=tok.pad_token_id)
                    new = gen.sequences[0, len(context):].tolist()
                    for token, scores in zip(new, gen.scores, strict=False):
                        logprobs.append(float(torch.log_softmax(scores[0].float(), -1)[token]))
                    completion += new
                    mask += [1] * len(new)
                    try:
                        answer = env._act(parse_json_action(tok.decode(new, skip_special_tokens=True)))
                    except PolicyError as exc:
                        answer = str(exc)
                    feedback = tok.encode("\n" + answer + "\n", add_special_tokens=False)
                    if env.done or _ == max_turns - 1:
                        break
                    completion += feedback
                    logprobs += [0.0] * len(feedback)
                    mask += [0] * len(feedback)
                    context = list(prompt_ids) + completion
                out["prompt_ids"].append(list(prompt_ids))
                out["completion_ids"].append(completion)
                out["logprobs"].append(logprobs)
                out["env_mask"].append(mask)
                out["env_reward"].append(env.reward)
            finally:
                env._close()
        return out

    return run

"""``openenv run ENV``: start an env through a provider, play episodes with a simple policy, stop it.

What it promises:

* The provider is chosen by the ``openenv_choose_provider`` decision hook (``--provider`` is the
  request; ``local`` by default). The server gets a fresh random token, so other local users cannot
  drive it.
* Actions come from the observation's ``legal_actions`` when it has them, else from the env's
  action schema (``GET /schema``): ``Literal``/enum fields pick among their choices, strings are
  short words, numbers lie in a small range. ``--policy random|first|cycle`` decides how a choice
  is made; ``--seed`` seeds both the policy and each episode's ``reset(seed=seed + episode)``, so a
  seeded run of a deterministic env is reproducible.
* The transcript shows every step (action, reward, done, a compact observation), then a summary
  table (episodes, steps, total and mean return, steps/s); ``--json`` prints the summary as JSON
  (schema ``openenv.run/1``) and nothing else on stdout. Runs of more than 20 episodes show a
  progress bar instead of the per-step transcript; ``--quiet`` shows only the summary.
* The server is **always** stopped: on success, on error, on Ctrl-C (exit 130) and on SIGTERM
  (exit 143). A lost server (``SessionLostError``) is reported with the server's exit status and
  log tail, exit 1. Unknown env, provider or transport names exit 2 with a suggestion, and so
  does ``--transport`` naming a transport without a client connector (the message lists those
  that have one); both are checked before any server starts.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from openenv.cli._output import EXIT_ERROR, EXIT_USAGE, console, fail, print_json, table

if TYPE_CHECKING:
    from openenv.client import SyncEnvClient
    from openenv.interfaces import ProviderHandle

__all__ = ["DEFAULT_MAX_STEPS", "SCHEMA", "SCHEMA_POLICIES", "ActionSampler", "Policy", "RunSummary", "register",
           "run"]

#: The step limit per episode when ``--max-steps`` is not given, for ``run`` and ``collect`` alike.
DEFAULT_MAX_STEPS = 100

SCHEMA = "openenv.run/1"
#: Above this many episodes the per-step transcript gives way to a progress bar.
PROGRESS_THRESHOLD = 20
_WORDS = ("hello", "world", "agent", "openenv", "reward", "policy", "action", "step", "echo", "grid")
_OBS_WIDTH = 160


class PolicyName(StrEnum):
    random = "random"
    first = "first"
    cycle = "cycle"


#: The policies that choose from the action schema (or the listed legal actions); ``collect`` takes
#: the same names, plus ``llm`` and ``module:callable``.
SCHEMA_POLICIES = tuple(p.value for p in PolicyName)


class _Terminated(BaseException):
    """SIGTERM, turned into an exception so that cleanup runs."""


# -- policies -------------------------------------------------------------------------------------


class ActionSampler:
    """Builds actions from an action model's JSON schema (required fields only; defaults cover
    the rest). Every leaf value is a choice among a few candidates, made by ``choose``."""

    def __init__(self, schema: dict[str, Any], choose: Callable[[list[Any]], Any]) -> None:
        self.schema = schema
        self.defs: dict[str, Any] = dict(schema.get("$defs", {}) or schema.get("definitions", {}))
        self.choose = choose

    def sample(self) -> dict[str, Any]:
        value = self._value(self.schema, top=True)
        return value if isinstance(value, dict) else {}

    def _resolve(self, s: dict[str, Any]) -> dict[str, Any]:
        for _ in range(32):  # bounded: a self-referencing $ref must not loop forever
            ref = s.get("$ref")
            if not isinstance(ref, str):
                break
            target = self.defs.get(ref.rsplit("/", 1)[-1], {})
            s = {**target, **{k: v for k, v in s.items() if k != "$ref"}}
        return s

    def _value(self, s: dict[str, Any], depth: int = 0, *, top: bool = False) -> Any:
        """A value for schema ``s``; ``top``: ``s`` (or the union member chosen) is the action."""
        s = self._resolve(s)
        if depth > 8:
            return s.get("default")
        if "const" in s:
            return s["const"]
        if isinstance(s.get("enum"), list) and s["enum"]:
            return self.choose(list(s["enum"]))
        for key in ("anyOf", "oneOf"):
            options = s.get(key)
            if isinstance(options, list) and options:
                usable = [o for o in options if self._resolve(o).get("type") != "null"] or options
                return self._value(self.choose(usable), depth + 1, top=top)
        if isinstance(s.get("allOf"), list) and len(s["allOf"]) == 1:
            return self._value({**s["allOf"][0]}, depth + 1, top=top)
        kind = s.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "string":
            return self._string(s)
        if kind == "integer":
            lo = int(s.get("minimum", s.get("exclusiveMinimum", -1) + 1))
            hi = int(s.get("maximum", s.get("exclusiveMaximum", lo + 10) - 1))
            return self.choose(list(range(lo, max(lo, min(hi, lo + 9)) + 1)))
        if kind == "number":
            low = float(s.get("minimum", s.get("exclusiveMinimum", 0.0)))
            high = float(s.get("maximum", s.get("exclusiveMaximum", low + 1.0)))
            return self.choose([round(low + (high - low) * k / 4, 3) for k in (1, 2, 3)])
        if kind == "boolean":
            return self.choose([False, True])
        if kind == "array":
            count = max(int(s.get("minItems", 1)), 1)
            count = min(count, int(s.get("maxItems", count)))
            return [self._value(s.get("items", {}), depth + 1) for _ in range(count)]
        if kind == "object" or "properties" in s:
            return self._object(s, top=top, depth=depth + 1)
        if kind == "null":
            return None
        return s.get("default", self.choose(list(_WORDS)))

    def _string(self, s: dict[str, Any]) -> str:
        word = str(self.choose(list(_WORDS)))
        min_len, max_len = int(s.get("minLength", 1)), s.get("maxLength")
        while len(word) < min_len:
            word += word
        return word[: int(max_len)] if max_len is not None else word

    def _object(self, s: dict[str, Any], *, top: bool = False, depth: int = 0) -> dict[str, Any]:
        s = self._resolve(s)
        props = s.get("properties", {}) or {}
        required = set(s.get("required", []) or [])
        # Constant fields are kept even when optional: they are union discriminators
        # ({"type": "call_tool"}), and leaving them out could select another member.
        return {
            name: self._value(prop, depth)
            for name, prop in props.items()
            if (name in required or "const" in self._resolve(prop))
            and not (top and name == "metadata")
        }


class Policy:
    """Chooses each action: among ``legal_actions`` when the observation lists them, else by
    sampling the action schema. ``random`` draws with a seeded RNG, ``first`` always takes the
    first candidate, ``cycle`` walks through the candidates step by step."""

    def __init__(self, name: str, action_schema: dict[str, Any], seed: int | None) -> None:
        self.name = name
        self.rng = random.Random(seed)
        self.index = 0
        self.sampler = ActionSampler(action_schema, self._choose)
        props = action_schema.get("properties", {}) or {}
        fields = [n for n in (action_schema.get("required") or list(props)) if n != "metadata"]
        # A bare legal action ("up") maps onto the action's only field ({"move": "up"}).
        self._single_field = fields[0] if len(fields) == 1 else None

    def _choose(self, options: list[Any]) -> Any:
        if self.name == "first":
            return options[0]
        if self.name == "cycle":
            return options[self.index % len(options)]
        return self.rng.choice(options)

    def act(self, observation: Any) -> dict[str, Any]:
        legal = observation.get("legal_actions") if isinstance(observation, dict) else None
        if legal and self._single_field is not None and isinstance(legal, list):
            # every item maps to an action: choose among the items, map only the one chosen
            # (the same choice as among the mapped list, which has the same length)
            action: dict[str, Any] | None = self._as_action(self._choose(legal))
            assert action is not None  # _single_field is set
        else:
            candidates = [a for a in (self._as_action(x) for x in legal or []) if a is not None]
            action = self._choose(candidates) if candidates else self.sampler.sample()
        self.index += 1
        return action

    def _as_action(self, item: Any) -> dict[str, Any] | None:
        if isinstance(item, dict):
            return item
        if self._single_field is not None:
            return {self._single_field: item}
        return None


# -- playing --------------------------------------------------------------------------------------


@dataclass
class EpisodeResult:
    episode: int
    steps: int = 0
    total_return: float = 0.0
    done: bool = False
    truncated: bool = False


@dataclass
class RunSummary:
    env: str
    provider: str
    policy: str
    seed: int | None
    episodes: int = 0
    steps: int = 0
    total_return: float = 0.0
    mean_return: float = 0.0
    steps_per_s: float = 0.0
    elapsed_s: float = 0.0
    per_episode: list[EpisodeResult] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc = {"schema": SCHEMA, **asdict(self)}
        doc["per_episode"] = [
            {"episode": e.episode, "steps": e.steps, "return": round(e.total_return, 6),
             "done": e.done, "truncated": e.truncated} for e in self.per_episode
        ]
        for key in ("total_return", "mean_return", "steps_per_s", "elapsed_s"):
            doc[key] = round(doc[key], 6 if "return" in key else 3)
        return doc


def _compact(observation: Any) -> str:
    if isinstance(observation, dict):
        observation = {k: v for k, v in observation.items() if k != "metadata"}
    text = json.dumps(observation, separators=(",", ":"), default=str)
    return text if len(text) <= _OBS_WIDTH else text[: _OBS_WIDTH - 1] + "…"


def _action_text(action: dict[str, Any]) -> str:
    return json.dumps(action, separators=(",", ":"), default=str)


def play(
    client: SyncEnvClient[Any, Any], policy: Policy, summary: RunSummary, *, episodes: int,
    max_steps: int, seed: int | None, say: Callable[[str], None] | None,
    advance: Callable[[], None] | None = None,
) -> RunSummary:
    """Play ``episodes`` episodes; ``say`` receives transcript lines (None: silent)."""
    started = time.perf_counter()
    for number in range(1, episodes + 1):
        kwargs = {"seed": seed + number - 1} if seed is not None else {}
        result = client.reset(**kwargs)
        episode = EpisodeResult(number)
        if say:
            say(f"episode {number}  reset  obs {_compact(result.observation)}")
        while not result.done and episode.steps < max_steps:
            action = policy.act(result.observation)
            result = client.step(action)
            episode.steps += 1
            episode.total_return += result.reward or 0.0
            if say:
                reward = "None" if result.reward is None else f"{result.reward:g}"
                say(f"  step {episode.steps:>3}  action {_action_text(action)}  reward {reward}  "
                    f"done {str(result.done).lower()}  obs {_compact(result.observation)}")
        episode.done = result.done
        obs = result.observation
        episode.truncated = bool(isinstance(obs, dict) and obs.get("truncated"))
        summary.per_episode.append(episode)
        summary.episodes += 1
        summary.steps += episode.steps
        summary.total_return += episode.total_return
        if say:
            end = ("truncated" if episode.truncated else "done") if episode.done else "step limit"
            say(f"episode {number}  {end} after {episode.steps} steps  return "
                f"{episode.total_return:g}")
        if advance:
            advance()
    summary.elapsed_s = time.perf_counter() - started
    summary.mean_return = summary.total_return / summary.episodes if summary.episodes else 0.0
    summary.steps_per_s = summary.steps / summary.elapsed_s if summary.elapsed_s > 0 else 0.0
    return summary


def _fetch_schema(base_url: str, token: str | None, env: str | None = None) -> dict[str, Any]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(base_url.rstrip("/") + "/schema")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            doc = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code != 426 or env is None:
            raise
        # 426: a WebSocket-only endpoint, as upstream providers' bridges are (openenv-sprites):
        # the action schema comes from the same env package installed here.
        return _local_action_schema(env)
    action = doc.get("action") if isinstance(doc, dict) else None
    if not isinstance(action, dict):
        raise ValueError(f"GET /schema has no action schema: {doc!r}")
    return action


def _local_action_schema(env: str) -> dict[str, Any]:
    from openenv.server import create_app

    try:
        app = create_app(env)
    except Exception as exc:
        raise ValueError(f"the server at the provider's URL speaks only WebSocket (HTTP 426), so its action schema "
                         f"must come from the env package '{env}' installed here, which failed: {exc}. Install it "
                         "here, or use a provider whose URL also serves HTTP.") from exc
    schema: dict[str, Any] = app.state.ctx.action_type.model_json_schema()
    return schema


def _print_summary(summary: RunSummary) -> None:
    t = table("Episodes", "Steps", "Total return", "Mean return", "Steps/s",
              title=f"{summary.env} via {summary.provider} ({summary.policy} policy)")
    t.add_row(str(summary.episodes), str(summary.steps), f"{summary.total_return:.4g}",
              f"{summary.mean_return:.4g}", f"{summary.steps_per_s:.1f}")
    console().print(t)


def _lost_message(exc: Exception, handle: ProviderHandle | None) -> str:
    message = f"lost the connection to the env server: {getattr(exc, 'message', exc)}".rstrip(".")
    if handle is None:
        return message
    deadline = time.monotonic() + 2.0
    while handle.is_running() and time.monotonic() < deadline:
        time.sleep(0.05)  # a crashing server may need a moment to be seen as gone
    code = getattr(handle, "exit_code", None)
    if not handle.is_running():
        how = f"was killed by signal {-code}" if isinstance(code, int) and code < 0 else \
            f"exited with code {code}" if code is not None else "is gone"
        message += f". The server {how}."
    tail = handle.logs(10)
    if tail:
        message += f"\nLast lines of its log:\n{tail}"
    return message


# -- the command ----------------------------------------------------------------------------------


def run(
    env: Annotated[str, typer.Argument(help="Registered env name, or 'module:Class'.")],
    provider: Annotated[str | None, typer.Option(
        "--provider", "-p", help="Provider to start the env with (default: chosen by plugins, "
        "else 'local').", show_default=False)] = None,
    episodes: Annotated[int, typer.Option(help="Episodes to play.", min=1)] = 1,
    policy: Annotated[PolicyName, typer.Option(help="How actions are chosen (`openenv collect` takes these, "
                                               "plus llm and module:callable).")] = PolicyName.random,
    seed: Annotated[int | None, typer.Option(help="Seed of the policy and of each reset "
                                             "(seed + episode - 1).", min=0,
                                             show_default=False)] = None,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Step limit per episode.",
                                           min=1)] = DEFAULT_MAX_STEPS,
    transport: Annotated[str | None, typer.Option(
        help="Client transport, one that has a client connector (default: ws when installed).",
        show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only print the summary.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON only.")] = False,
) -> None:
    """Start ENV through a provider, play episodes with a simple policy, then stop the server."""
    import secrets

    from openenv.client import GenericEnvClient
    from openenv.errors import (
        ConfigError,
        OpenEnvError,
        PluginError,
        SessionLostError,
        UnknownNameError,
    )
    from openenv.interfaces import LaunchSpec
    from openenv.plugins import get_plugin_manager
    from openenv.registry import NameConflictError

    pm = get_plugin_manager()
    if transport is not None:  # checked before any server starts, with the same line as `serve`
        from openenv.client_connect import client_transport

        try:
            client_transport(transport)
        except (UnknownNameError, ConfigError) as exc:
            fail(str(exc), EXIT_USAGE)
        except PluginError as exc:
            fail(str(exc), EXIT_ERROR)
    from openenv.cli.plugins_cmd import announce_env
    announce_env(env)  # one line: which plugin serves it (or why none can)
    try:
        provider_name = pm.choose_provider(env, provider)
        provider_line = pm.served_by_news("provider", provider_name)
        provider_obj = pm.catalog.providers.load(provider_name)()
    except (UnknownNameError, NameConflictError) as exc:  # a contested name: as for envs
        fail(str(exc), EXIT_USAGE)
    except PluginError as exc:
        fail(str(exc), EXIT_ERROR)
    if provider_line is not None:  # which plugin starts the server, when not one of OpenEnv's own
        typer.echo(provider_line, err=True)

    token = secrets.token_urlsafe(24)
    spec = LaunchSpec(env=env, max_sessions=1, token=token)
    summary = RunSummary(env=env, provider=provider_name, policy=policy.value, seed=seed)
    handle: ProviderHandle | None = None
    client: SyncEnvClient[Any, Any] | None = None
    exit_code = 0
    previous_term = _on_sigterm()
    try:
        try:
            handle = provider_obj.start(spec)
        except (UnknownNameError, ConfigError) as exc:
            fail(str(exc), EXIT_USAGE)
        except (RuntimeError, TimeoutError, OSError) as exc:
            fail(f"could not start env '{env}' with provider '{provider_name}': {exc}", EXIT_ERROR)
        action_schema = _fetch_schema(handle.base_url, token, env)
        client = GenericEnvClient(handle.base_url, token=token, transport=transport).sync()
        the_policy = Policy(policy.value, action_schema, seed)
        long_run = episodes > PROGRESS_THRESHOLD
        say = None if (quiet or as_json or long_run) else typer.echo
        if long_run and not (quiet or as_json):
            from rich.progress import Progress

            with Progress(console=console(stderr=True), transient=True) as progress:
                task = progress.add_task(f"{env}: episodes", total=episodes)
                play(client, the_policy, summary, episodes=episodes, max_steps=max_steps,
                     seed=seed, say=None, advance=lambda: progress.advance(task))
        else:
            play(client, the_policy, summary, episodes=episodes, max_steps=max_steps, seed=seed,
                 say=say)
        client.close()
        client = None
    except (KeyboardInterrupt, _Terminated) as exc:
        exit_code = 143 if isinstance(exc, _Terminated) else 130
        typer.echo("interrupted: stopping the env server", err=True)
    except SessionLostError as exc:
        exit_code = EXIT_ERROR
        typer.echo(f"error: {_lost_message(exc, handle)}", err=True)
    except OpenEnvError as exc:
        exit_code = EXIT_ERROR
        typer.echo(f"error: the env server refused a request: {exc}", err=True)
    except (ConfigError, OSError, ValueError) as exc:
        exit_code = EXIT_ERROR
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
    finally:
        _cleanup(client, handle)
        signal.signal(signal.SIGTERM, previous_term)
    if exit_code:
        raise typer.Exit(exit_code)
    if as_json:
        print_json(summary.to_json())
    else:
        _print_summary(summary)


def _on_sigterm() -> Any:
    def terminated(*_: object) -> None:
        raise _Terminated

    return signal.signal(signal.SIGTERM, terminated)


def _cleanup(client: SyncEnvClient[Any, Any] | None, handle: ProviderHandle | None) -> None:
    """Stop the server first (bounded), then drop the client; a second Ctrl-C cannot cut it short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if handle is not None:
            try:
                handle.stop()
            except Exception as exc:  # reported, never hidden: the user may need to clean up
                typer.echo(f"warning: stopping the env server failed: {exc}", err=True)
        if client is not None:
            try:
                client.close()
            except Exception:
                pass  # the server is gone already; nothing left to close politely
    finally:
        signal.signal(signal.SIGINT, previous)


def register(app: typer.Typer) -> None:
    """Add ``openenv run`` to ``app``."""
    app.command("run", no_args_is_help=True)(run)

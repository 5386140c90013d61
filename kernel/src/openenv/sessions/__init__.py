"""The transport-independent session manager: the one owner of every session rule.

One ``SessionManager`` per served env. Transports only translate frames or requests into calls
here, so the same request gets the same answer on every transport:

* **Capacity with reservation.** A slot is reserved (under the event loop, so atomically) before
  the env is built; concurrent connects can never overshoot ``max_sessions``. A slot is released
  only after the env's ``close()`` has run. A concurrency-safe env served without an explicit
  bound gets ``DEFAULT_CONCURRENT_SESSIONS`` (``default_max_sessions``); any other env gets 1.
* **Connections and activity.** ``attach``/``join``/``detach`` count the live connections on a
  session, ``touch`` records activity. Sessions with no live connection expire after
  ``idle_timeout_s``; a session with a connection is never reaped (dead connections are found by
  the transport's pings).
* **One mode rule** (``openenv.modes.ModePolicy``), applied in ``reset``/``step``/``state``;
  tool calls (``call_tool``) are never refused by mode.
* **One step-kwargs rule** (``StepKwargsPolicy``), applied in ``step``.
* **Step before reset.** A step that fails before the session's first reset is answered with
  ``RESET_REQUIRED`` (``ResetRequiredError``), which tells the caller to reset first.
* **Execution** (``openenv.sessions.runner``). Async envs are awaited on the event loop (no thread
  hop). Sync envs with ``BLOCKING = False`` run inline (they must never block: nothing can interrupt
  them). Other sync envs run on a thread of their own session, which creates, steps and closes the
  env, so a hung env stalls only its session; ``REQUIRES_SINGLE_THREAD_EXECUTOR`` envs share one
  thread. ``isolation="process"`` puts each session's env in a worker process of its own
  (``openenv.sessions.isolation``), killed when its call overruns.
* **Timeouts.** ``step_timeout_s`` (default ``DEFAULT_STEP_TIMEOUT_S``, 300 s) bounds each
  reset/step/state that runs off the loop or is async; ``factory_timeout_s`` bounds building the env.
  A timed-out async call is cancelled and the session goes on. A call on a thread or in a worker
  process that overruns cannot be taken back: the session is *failed* — its slot is freed at once,
  no call enters that env again (``SessionError`` naming why), the worker process is killed or the
  thread left to finish alone, and ``env.close()`` is skipped. ``close`` waits at most
  ``close_grace_s`` for a running call, then abandons the env the same way.
* **Rewards** (``scoring``). With a rubric (``SessionManager(rubric=...)``), each step's reward is
  the rubric's score and its components travel next to it (docs/protocol.md §2.7); a client can
  never set a reward. Without one, nothing extra runs.
"""

from __future__ import annotations

from openenv.modes import Mode, ModePolicy
from openenv.sessions.arguments import UPSTREAM_STEP_FIELDS, ResetArgsPolicy, StepKwargsPolicy
from openenv.sessions.manager import SessionManager
from openenv.sessions.session import (
    DEFAULT_CONCURRENT_SESSIONS,
    DEFAULT_FACTORY_TIMEOUT_S,
    DEFAULT_STEP_TIMEOUT_S,
    ResetRequiredError,
    Session,
    default_max_sessions,
)

__all__ = [
    "DEFAULT_CONCURRENT_SESSIONS",
    "DEFAULT_FACTORY_TIMEOUT_S",
    "DEFAULT_STEP_TIMEOUT_S",
    "UPSTREAM_STEP_FIELDS",
    "Mode",
    "ModePolicy",
    "ResetArgsPolicy",
    "ResetRequiredError",
    "Session",
    "SessionManager",
    "StepKwargsPolicy",
    "default_max_sessions",
]

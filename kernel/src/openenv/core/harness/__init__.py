"""``openenv.core.harness``: upstream's trainer-side rollout API, for code that imports it.

Provided (same names, fields and behaviour as upstream 0.10): the data types of a rollout
(``ToolResult``, ``VerifyResult``, ``RolloutEvent``, ``ToolTraceEntry``, ``ModelStepResult``,
``HarnessRolloutResult``, ``HarnessRunLimits``, ``TraceEntry``, ``TrainingTurn``,
``TrainingTrace``), the session contracts (``ResourceSession``, ``ResourceSessionFactory``,
``HarnessAdapter``, ``ModelStep``, ``LoopOwningSession``, ``TrainableSession``), and two working
pieces: ``StepEnvSessionAdapter`` (any reset/step client as a session), ``MCPHarnessAdapter``
(the white-box tool-calling loop) and ``build_harness_rollout_func`` (TRL's ``rollout_func`` over
white-box rollouts, upstream's signature, the env's reward via ``env_reward_of``). The CLI adapter
and the turn-based agentic harness of upstream's RFC 005 (``HarnessEnvironment``,
``HarnessProcess``, …) are not: using them raises ``UnsupportedFeature`` (agent programs run
under openenvkit-gateway's ``CommandHarness`` instead).
"""

from __future__ import annotations

from openenv.core._unsupported import module_getattr
from openenv.core.harness.rollout import (
    RESERVED_TOOL_NAMES,
    HarnessAdapter,
    HarnessRolloutResult,
    HarnessRunLimits,
    LoopOwningSession,
    MCPHarnessAdapter,
    Message,
    ModelStep,
    ModelStepResult,
    ResourceSession,
    ResourceSessionFactory,
    RolloutEvent,
    StepEnvSessionAdapter,
    ToolResult,
    ToolTraceEntry,
    TraceEntry,
    TrainableSession,
    VerifyResult,
    build_harness_rollout_func,
    env_reward_of,
)
from openenv.core.harness.training import TrainingTrace, TrainingTurn

__all__ = ["RESERVED_TOOL_NAMES", "HarnessAdapter", "HarnessRolloutResult", "HarnessRunLimits", "LoopOwningSession",
           "MCPHarnessAdapter", "Message", "ModelStep", "ModelStepResult", "ResourceSession", "ResourceSessionFactory",
           "RolloutEvent", "StepEnvSessionAdapter", "ToolResult", "ToolTraceEntry", "TraceEntry", "TrainableSession",
           "TrainingTrace", "TrainingTurn", "VerifyResult", "build_harness_rollout_func", "env_reward_of"]

_ALT = ("drive episodes with openenv_rollouts (collect, the TRL adapter), MCPHarnessAdapter with "
        "build_harness_rollout_func, or for agent programs openenvkit-gateway's CommandHarness (docs/gateway.md)")
_WHY = "the agentic harness runtime of upstream's RFC 005 is not part of this OpenEnv"
__getattr__ = module_getattr("openenv.core.harness", {name: (_ALT, _WHY) for name in (
    "CLIHarnessAdapter", "SessionMCPBridge", "AgenticHarnessAdapter", "HarnessError",
    "HarnessNotRunningError", "HarnessStartupError", "HarnessTurnTimeoutError", "build_bridge_server",
    "HarnessMCPBridge", "HarnessConfig", "HarnessTransport", "HarnessAction", "HarnessEnvironment",
    "events_to_metadata", "HarnessClientMessage", "HarnessEvent", "HarnessEventType", "HarnessResponse",
    "HarnessProcess", "resolve_tool_conflicts")})

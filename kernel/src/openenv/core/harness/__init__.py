"""``openenv.core.harness``: upstream's trainer-side rollout API, for code that imports it.

Provided (same names, fields and behaviour as upstream 0.10): the data types of a rollout
(``ToolResult``, ``VerifyResult``, ``RolloutEvent``, ``ToolTraceEntry``, ``ModelStepResult``,
``HarnessRolloutResult``, ``HarnessRunLimits``, ``TraceEntry``, ``TrainingTurn``,
``TrainingTrace``), the session contracts (``ResourceSession``, ``ResourceSessionFactory``,
``HarnessAdapter``, ``ModelStep``, ``LoopOwningSession``, ``TrainableSession``), and two working
pieces: ``StepEnvSessionAdapter`` (any reset/step client as a session), ``MCPHarnessAdapter``
(the white-box tool-calling loop) and ``build_harness_rollout_func`` (TRL's ``rollout_func`` over
white-box rollouts, upstream's signature, the env's reward via ``env_reward_of``).
``CLIHarnessAdapter`` and ``SessionMCPBridge`` (upstream's black-box adapter) come from the
openenvkit-gateway plugin when it is installed (``openenv_gateway.cliharness``: its
``CommandRunner`` runs an agent program through the capture gateway), loaded on first use, never
at import; without it, using them raises ``UnsupportedFeature`` naming ``pip install
openenvkit-gateway``. The turn-based agentic harness of upstream's RFC 005 (``HarnessEnvironment``,
``HarnessProcess``, …) is not provided: using it raises ``UnsupportedFeature``.
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

#: Names the gateway plugin provides (through openenv_upstream_names, when first asked for).
_FROM_GATEWAY = ("CLIHarnessAdapter", "SessionMCPBridge")
_ALT = ("drive episodes with openenv_rollouts (collect, the TRL adapter), MCPHarnessAdapter with "
        "build_harness_rollout_func, or for agent programs openenvkit-gateway's CommandHarness (docs/gateway.md)")
_WHY = "the agentic harness runtime of upstream's RFC 005 is not part of this OpenEnv"
_refused = module_getattr("openenv.core.harness", {
    **{name: ("pip install openenvkit-gateway; it provides upstream's black-box adapter (docs/gateway.md)",
              "it comes with the openenvkit-gateway plugin, which is not installed")
       for name in _FROM_GATEWAY},
    **{name: (_ALT, _WHY) for name in (
    "AgenticHarnessAdapter", "HarnessError",
    "HarnessNotRunningError", "HarnessStartupError", "HarnessTurnTimeoutError", "build_bridge_server",
    "HarnessMCPBridge", "HarnessConfig", "HarnessTransport", "HarnessAction", "HarnessEnvironment",
    "events_to_metadata", "HarnessClientMessage", "HarnessEvent", "HarnessEventType", "HarnessResponse",
    "HarnessProcess", "resolve_tool_conflicts")}})


def __getattr__(name: str) -> object:
    if name in _FROM_GATEWAY:
        from openenv.plugins import get_plugin_manager

        # The gateway plugin answers openenv_upstream_names for this module (the kernel never imports it).
        provided = get_plugin_manager().upstream_name("openenv.core.harness", name)
        if provided is not None:
            return provided
    return _refused(name)

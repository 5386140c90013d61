"""``openenv.core.harness``: upstream's trainer-side rollout API, for code that imports it.

Provided (same names, fields and behaviour as upstream 0.10): the data types of a rollout
(``ToolResult``, ``VerifyResult``, ``RolloutEvent``, ``ToolTraceEntry``, ``ModelStepResult``,
``HarnessRolloutResult``, ``HarnessRunLimits``, ``TraceEntry``, ``TrainingTurn``,
``TrainingTrace``), the session contracts (``ResourceSession``, ``ResourceSessionFactory``,
``HarnessAdapter``, ``ModelStep``, ``LoopOwningSession``, ``TrainableSession``), and two working
pieces: ``StepEnvSessionAdapter`` (any reset/step client as a session), ``MCPHarnessAdapter``
(the white-box tool-calling loop) and ``build_harness_rollout_func`` (TRL's ``rollout_func`` over
white-box rollouts, upstream's signature, the env's reward via ``env_reward_of``).
From the openenvkit-gateway plugin, when it is installed (loaded on first use, never at import;
without the plugin, using one raises ``UnsupportedFeature`` naming ``pip install
openenvkit-gateway``):

* ``CLIHarnessAdapter`` and ``SessionMCPBridge``, upstream's black-box adapter
  (``openenv_gateway.cliharness``: its ``CommandRunner`` runs an agent program through the capture
  gateway);
* upstream's RFC 005 turn-based agentic harness (``openenv_gateway.agentic``):
  ``HarnessEnvironment`` / ``HarnessAction``, ``AgenticHarnessAdapter`` and its errors,
  ``HarnessConfig`` / ``HarnessTransport``, the event types and ``events_to_metadata``,
  ``HarnessProcess``, ``HarnessMCPBridge`` / ``build_bridge_server`` and
  ``resolve_tool_conflicts``. The plugin also serves upstream's ``/harness`` channel for such
  envs, and ships ``CommandTurnAdapter`` (a harness program speaking JSON lines).
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
_BLACK_BOX = ("CLIHarnessAdapter", "SessionMCPBridge")
_RFC005 = ("AgenticHarnessAdapter", "HarnessError", "HarnessNotRunningError", "HarnessStartupError",
           "HarnessTurnTimeoutError", "build_bridge_server", "HarnessMCPBridge", "HarnessConfig", "HarnessTransport",
           "HarnessAction", "HarnessEnvironment", "events_to_metadata", "HarnessClientMessage", "HarnessEvent",
           "HarnessEventType", "HarnessResponse", "HarnessProcess", "resolve_tool_conflicts")
_FROM_GATEWAY = _BLACK_BOX + _RFC005
_refused = module_getattr("openenv.core.harness", {
    **{name: ("pip install openenvkit-gateway; it provides upstream's black-box adapter (docs/gateway.md)",
              "it comes with the openenvkit-gateway plugin, which is not installed")
       for name in _BLACK_BOX},
    **{name: ("pip install openenvkit-gateway; it provides upstream's RFC 005 turn-based harness and its "
              "/harness channel (docs/gateway.md)",
              "it comes with the openenvkit-gateway plugin, which is not installed")
       for name in _RFC005}})


def __getattr__(name: str) -> object:
    if name in _FROM_GATEWAY:
        from openenv.plugins import get_plugin_manager

        # The gateway plugin answers openenv_upstream_names for this module (the kernel never imports it).
        provided = get_plugin_manager().upstream_name("openenv.core.harness", name)
        if provided is not None:
            return provided
    return _refused(name)

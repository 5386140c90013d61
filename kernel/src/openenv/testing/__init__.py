"""The plugin-author kit: contracts, a live server, polling, fakes (``openenv.testing``).

* Contracts (no pytest needed; each raises ``ContractError`` naming the broken promise):
  ``EnvContract(MyEnv).run()``, ``TransportContract("mine").run()``,
  ``ProviderContract(MyProvider(), "echo").run()``; ``play(client)`` is the provider contract's
  episode, ``sample_action(ActionType)`` a valid action for any typed action model.
* ``live_server(env, **settings)`` – a real uvicorn server on 127.0.0.1 (free port) in a thread;
  ``serving(app)`` – the same on the current event loop; ``LiveServer(app)`` for an app you built.
* CLI helpers (``openenv.testing.cli``): ``served_cli`` / ``run_cli`` run ``openenv serve|run`` as
  child processes on 127.0.0.1; ``readme_snippets`` / ``exec_snippet`` / ``run_snippet`` test README
  code; ``check_registered`` checks a plugin's lazy env registration and manifest;
  ``check_cli_imports`` checks the CLI's listings (``LISTINGS``) import no SDK of a plugin
  (``cli_imports`` lists what a command imported); ``cli_env`` is the clean environment they run
  in; ``replay_run`` replays a ``run`` transcript in-process.
* Vendor boundary (``openenv.testing.boundary``): ``StandIn`` serves a local stand-in of a cloud
  service (``self_signed_cert`` when it must speak https), ``free_port`` a port for it,
  ``orphan_from`` a server whose owner was SIGKILLed.
* ``check_replica_loss(pool, kill)`` – a pool survives one of its replicas killed mid-run (any
  engine: the caller's ``kill`` deletes the Pod, kills the actor or the container).
* ``restore_default_signals`` – a ``preexec_fn`` for children a test sends SIGINT: the default
  disposition even when the test run was started as a background job (SIGINT ignored);
  ``processes_matching(marker)`` – the pids whose command line contains ``marker`` (leftover checks).
* ``wait_until`` / ``wait_until_async`` / ``eventually`` – bounded polling.
* ``EchoEnv`` (``EchoAction``, ``EchoObservation``) – a typed echo env with failure modes, for
  transport and server tests; ``WalkEnv`` (``WalkAction``, ``WalkObservation``) – a seeded random
  walk that supports snapshots, for fork/restore tests.
* Fakes: ``FakeEntryPoint`` / ``make_entry_point`` (with its ``FakeDistribution``) stand in for
  installed entry points, ``make_plugin_module`` builds an in-memory plugin module from hook
  functions, ``make_catalogue_plugin(envs=..., providers=...)`` one that registers those.
* Fixtures: opt in with ``pytest_plugins = ["openenv.testing.fixtures"]`` in a top-level
  ``conftest.py`` (see ``openenv.testing.fixtures``).

Only ``openenv.testing.fixtures`` imports pytest. Everything named here is public and kept
stable for third-party plugins; helpers only this repository's tests use live in its ``tests/``
folders, and the contracts' internals in private modules (``openenv.testing._served``).
"""

from __future__ import annotations

from openenv.testing.boundary import StandIn, free_port, orphan_from, self_signed_cert
from openenv.testing.cli import (
    LISTINGS,
    check_cli_imports,
    check_registered,
    cli_env,
    cli_imports,
    exec_snippet,
    readme_snippets,
    replay_run,
    run_cli,
    run_snippet,
    served_cli,
)
from openenv.testing.contracts import ProviderContract, play
from openenv.testing.env_contract import EnvContract, sample_action
from openenv.testing.envs import EchoAction, EchoEnv, EchoObservation
from openenv.testing.errors import ContractError
from openenv.testing.fakes import (
    FakeDistribution,
    FakeEntryPoint,
    make_catalogue_plugin,
    make_entry_point,
    make_plugin_module,
)
from openenv.testing.live import LiveServer, live_server, serving
from openenv.testing.pool_check import check_replica_loss
from openenv.testing.processes import processes_matching, restore_default_signals
from openenv.testing.transport_contract import TransportContract
from openenv.testing.waiting import eventually, wait_until, wait_until_async
from openenv.testing.walk import WalkAction, WalkEnv, WalkObservation

__all__ = [
    "StandIn",
    "free_port",
    "LISTINGS",
    "ContractError",
    "EchoAction",
    "EchoEnv",
    "EchoObservation",
    "EnvContract",
    "WalkAction",
    "WalkEnv",
    "WalkObservation",
    "FakeDistribution",
    "FakeEntryPoint",
    "LiveServer",
    "ProviderContract",
    "TransportContract",
    "check_cli_imports",
    "check_replica_loss",
    "check_registered",
    "cli_env",
    "cli_imports",
    "make_catalogue_plugin",
    "eventually",
    "exec_snippet",
    "live_server",
    "make_entry_point",
    "make_plugin_module",
    "orphan_from",
    "play",
    "readme_snippets",
    "processes_matching",
    "restore_default_signals",
    "replay_run",
    "run_cli",
    "run_snippet",
    "sample_action",
    "self_signed_cert",
    "served_cli",
    "serving",
    "wait_until",
    "wait_until_async",
]

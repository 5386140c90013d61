"""Start a server through a provider, print its handle id, then SIGKILL ourselves.

Usage: [DETACH=0|1] python start_and_die.py <provider: local|uv> <env> [PYTHONPATH for the env]
With DETACH=1 (default) the server outlives us (a real orphan); with 0 it should die with us.
The server is left behind with a dead owner: what `gc()` must clean up.
"""

import os
import signal
import sys

from openenv.interfaces import LaunchSpec

provider_name, env = sys.argv[1], sys.argv[2]
env_vars = {"PYTHONPATH": sys.argv[3]} if len(sys.argv) > 3 else {}
if provider_name == "uv":
    from openenv_provider_local.uv import UvProvider as Provider
else:
    from openenv_provider_local.local import LocalProvider as Provider

detach = os.environ.get("DETACH", "1") == "1"
handle = Provider().start(LaunchSpec(env=env, env_vars=env_vars, startup_timeout_s=120,
                                    options={"detach": detach}))
print(handle.id, handle.pgid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)

"""Start a detached ``bwrap`` server, print its id and process group, then SIGKILL ourselves: a
server whose owner is dead, for ``gc`` to clean up. Usage: python start_and_die.py <env>"""

import os
import signal
import sys

from openenv.interfaces import LaunchSpec
from openenv_provider_bwrap.provider import BwrapProvider

handle = BwrapProvider().start(LaunchSpec(env=sys.argv[1], startup_timeout_s=60, options={"detach": True}))
print(handle.id, handle.pgid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)

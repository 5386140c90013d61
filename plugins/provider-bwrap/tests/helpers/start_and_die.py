"""Start a ``bwrap`` server, print its id and process group, then SIGKILL ourselves: a server whose
owner is dead. Detached (the default) it lives on for ``gc`` to clean up; with ``attached`` it must
die with us. Usage: python start_and_die.py <env> [attached]"""

import os
import signal
import sys

from openenv.interfaces import LaunchSpec
from openenv_provider_bwrap.provider import BwrapProvider

detach = sys.argv[2:] != ["attached"]
handle = BwrapProvider().start(LaunchSpec(env=sys.argv[1], startup_timeout_s=60, options={"detach": detach}))
print(handle.id, handle.pgid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)

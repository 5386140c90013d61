"""Start a detached ``slurm`` server, print its job id, then SIGKILL ourselves: a job whose owner
is dead, for ``gc`` to cancel. Usage: python start_and_die.py <env>"""

import os
import signal
import sys

from openenv.interfaces import LaunchSpec
from openenv_provider_slurm.provider import SlurmProvider

handle = SlurmProvider().start(LaunchSpec(env=sys.argv[1], startup_timeout_s=60, options={"detach": True}))
print(handle.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)

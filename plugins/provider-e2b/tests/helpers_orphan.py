"""Start an e2b env server (E2B_* from the environment), print its id, wait to be killed."""

import sys
import time

from openenv.interfaces import LaunchSpec
from openenv_provider_e2b.provider import E2BProvider

handle = E2BProvider().start(LaunchSpec(env="echo", startup_timeout_s=120.0, options={
    "template": "openenv-echo", "host": "127.0.0.1", "port": int(sys.argv[1]),
    "url": "http://127.0.0.1:{port}"}))
print(handle.id, flush=True)
time.sleep(600)

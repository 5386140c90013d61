"""Start a novita env server (NOVITA_* from the environment), print its id, wait to be killed."""

import sys
import time

from openenv.interfaces import LaunchSpec
from openenv_provider_novita.provider import NovitaProvider

handle = NovitaProvider().start(LaunchSpec(env="echo", startup_timeout_s=120.0, options={
    "template": "openenv-echo", "host": "127.0.0.1", "port": int(sys.argv[1]),
    "url": "http://127.0.0.1:{port}"}))
print(handle.id, flush=True)
time.sleep(600)

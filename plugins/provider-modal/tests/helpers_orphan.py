"""Start a modal env server (MODAL_* from the environment), print its id, wait to be killed."""

import sys
import time

from openenv.interfaces import LaunchSpec
from openenv_provider_modal.provider import ModalProvider

handle = ModalProvider().start(LaunchSpec(env="echo", token="orphan-token", startup_timeout_s=120.0, options={
    "image": "python:3.11", "host": "127.0.0.1", "port": int(sys.argv[1])}))
print(handle.id, flush=True)
time.sleep(600)

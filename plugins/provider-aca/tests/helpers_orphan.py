"""Start an aca env server (ACA_* / AZURE_* from the environment), print its id, wait to be killed."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from aca_fake import FakeCredential

from openenv.interfaces import LaunchSpec
from openenv_provider_aca.provider import AcaProvider

handle = AcaProvider(credential=FakeCredential(sys.argv[1])).start(LaunchSpec(
    env="echo", startup_timeout_s=120.0,
    options={"disk": "ubuntu", "host": "127.0.0.1", "port": int(sys.argv[2]), "poll_interval_s": 1}))
print(handle.id, flush=True)
time.sleep(600)

"""Start a detached env-server actor on the cluster at argv[1], print its id, then wait to be killed."""

import sys
import time

from openenv.interfaces import LaunchSpec
from openenv_provider_ray.provider import RayProvider

handle = RayProvider(address=sys.argv[1]).start(
    LaunchSpec(env="echo", options={"cpus": 0.25, "detach": True}, startup_timeout_s=120.0))
print(handle.id, flush=True)
time.sleep(600)

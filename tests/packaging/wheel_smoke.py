"""Plays one echo episode with the kernel, the ws transport and the echo env installed from wheels.

Run by ``nox -s wheel_install`` with the interpreter of a fresh venv that holds only those three
wheels (and their third-party dependencies), from a folder outside the checkout, so nothing of the
source tree can be imported by accident. Checks, in order:

1. each of our three distributions is installed from a ``.whl`` file in ``--wheels`` (not from a
   folder, not editable, not from an index), and ``openenv`` is imported from this venv;
2. ``openenv serve echo`` (the console script of the kernel wheel) starts on 127.0.0.1 and writes
   its ready file;
3. the kernel's ``EnvClient`` plays one episode against it over ``ws`` (reset, three steps, state)
   and gets the echo env's documented rewards (0.1 per character).

Exit status 0 with one ``ok`` line, or 1 with what went wrong. The server is stopped by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata as md
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["main"]

#: Our distributions this check installs, and the import package each provides.
DISTS = {"openenvkit": "openenv", "openenvkit-transport-ws": "openenv_transport_ws",
         "openenvkit-env-echo": "openenv_env_echo"}


def _fail(message: str) -> int:
    print(f"wheel install: FAILED: {message}", file=sys.stderr)
    return 1


def check_provenance(wheels: Path) -> str | None:
    """``None`` when every distribution in ``DISTS`` came from a wheel file in ``wheels``."""
    for dist_name, package in DISTS.items():
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            return f"{dist_name} is not installed in {sys.prefix}"
        direct = dist.read_text("direct_url.json")
        if not direct:
            return f"{dist_name} {dist.version} was installed from an index, not from {wheels}"
        info = json.loads(direct)
        source = Path(unquote(urlparse(info.get("url", "")).path))
        if info.get("dir_info") or source.suffix != ".whl" or source.parent.resolve() != wheels.resolve():
            return f"{dist_name} was installed from {source}, not from a wheel in {wheels}"
        if not any(str(f).startswith(f"{package}/") for f in dist.files or []):
            return f"{dist_name} does not provide the import package {package!r}"
    import openenv

    if not Path(openenv.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()):
        return f"openenv was imported from {openenv.__file__}, outside this venv ({sys.prefix})"
    return None


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``openenv serve echo`` through the kernel wheel's console script, on 127.0.0.1."""
    script = Path(sys.executable).parent / "openenv"
    ready = workdir / "ready.json"
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - kept open for the child's lifetime
    proc = subprocess.Popen([str(script), "serve", "echo", "--host", "127.0.0.1", "--port", "0",
                             "--ready-file", str(ready)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, cwd=workdir)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            tail = (workdir / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"`openenv serve echo` did not become ready:\n{tail}")
        time.sleep(0.02)
    return proc, int(json.loads(ready.read_text())["port"])


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def play(port: int) -> list[float]:
    from openenv import EnvClient
    from openenv_env_echo.models import EchoAction, EchoObservation

    rewards: list[float] = []
    async with EnvClient(f"http://127.0.0.1:{port}", action_type=EchoAction,
                         observation_type=EchoObservation, transport="ws") as env:
        await env.reset(seed=1)
        for message in ("a", "bb", "ccc"):
            result = await env.step(EchoAction(message=message))
            if result.observation.echoed_message != message:
                raise RuntimeError(f"echo returned {result.observation.echoed_message!r} for {message!r}")
            rewards.append(round(float(result.reward or 0.0), 3))
        state = await env.state()
        if state.step_count != 3:
            raise RuntimeError(f"state.step_count is {state.step_count} after 3 steps")
    return rewards


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--wheels", type=Path, required=True, help="the folder the wheels were installed from")
    args = parser.parse_args(argv)
    problem = check_provenance(args.wheels)
    if problem:
        return _fail(problem)
    with tempfile.TemporaryDirectory(prefix="openenv-wheel-smoke-") as tmp:
        try:
            proc, port = start_server(Path(tmp))
        except RuntimeError as exc:
            return _fail(str(exc))
        try:
            rewards = asyncio.run(play(port))
        except Exception as exc:
            return _fail(f"episode against `openenv serve echo` failed: {type(exc).__name__}: {exc}")
        finally:
            stop(proc)
    if rewards != [0.1, 0.2, 0.3]:
        return _fail(f"rewards {rewards}, expected [0.1, 0.2, 0.3] (0.1 per character)")
    versions = ", ".join(f"{d} {md.version(d)}" for d in DISTS)
    print(f"wheel install: ok — {versions} from {args.wheels}; one episode over ws, rewards {rewards}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

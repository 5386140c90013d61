"""A local stand-in for an OpenShell 0.1.2 gateway, at the network boundary of the ``openshell`` SDK.

``openenv-openshell`` reaches OpenShell only through ``openshell.SandboxClient``, a gRPC client of
the gateway's ``openshell.v1.OpenShell`` service; the SDK finds the gateway from the CLI's registry
(``$XDG_CONFIG_HOME/openshell/gateways/<name>/metadata.json``). ``OpenShellStandin`` is a grpcio
server on 127.0.0.1 built from the SDK's OWN generated modules (``openshell._proto``), implementing
the four methods the provider calls, with the gateway's wire messages:

* ``Health`` answers the gateway version (the provider refuses any other than 0.1.2);
* ``CreateSandbox`` starts the sandbox's ``spec.command`` (with ``spec.environment``) as a real
  process on this machine, answers the sandbox (id, name, workspace, labels) and the URL of each
  requested service exposure; a taken name is ``ALREADY_EXISTS``;
* ``GetSandbox`` reports its phase: ``PROVISIONING`` until the exposed port accepts connections,
  then ``READY`` (``ERROR`` if the process exited); an unknown name is ``NOT_FOUND``;
* ``DeleteSandbox`` stops the process (and what it started: it leads its own process group) and
  answers ``COMPLETED`` (``ALREADY_ABSENT`` for a missing name with ``allow_missing``).

Every other method is the generated servicer's ``UNIMPLEMENTED``. The gateway speaks mutual TLS as
a real one does (``register_gateway`` writes the CA and a client certificate where the SDK looks for
them, from ``openssl``); without ``tls`` it is the SDK's plaintext loopback profile. A sandbox's
ports are virtual: the exposed ``target_port`` (and the same number among the command's arguments)
is mapped to a free loopback port, which is what the service URL names.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from openshell._proto import datamodel_pb2, openshell_pb2, openshell_pb2_grpc

__all__ = ["GATEWAY_VERSION", "OpenShellStandin"]

GATEWAY_VERSION = "0.1.2"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Sandbox:
    id: str
    name: str
    workspace: str
    labels: dict[str, str]
    process: subprocess.Popen[bytes]
    port: int
    service_urls: dict[str, str] = field(default_factory=dict)


def _make_certificates(folder: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made with ``openssl``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("openssl is needed for the stand-in's mutual TLS; install it or use tls=False")
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in ("ca.crt", "ca.key", "server.crt", "server.key", "tls.crt", "tls.key")}

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=openshell-standin-ca",
        "-keyout", str(paths["ca.key"]), "-out", str(paths["ca.crt"]))
    for cert, key, cn, ext in (("server.crt", "server.key", "127.0.0.1", "subjectAltName=IP:127.0.0.1"),
                               ("tls.crt", "tls.key", "openenv-test-client", "extendedKeyUsage=clientAuth")):
        csr = folder / f"{cert}.csr"
        extfile = folder / f"{cert}.ext"
        extfile.write_text(ext + "\n")
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", str(paths[key]), "-out", str(csr))
        run("x509", "-req", "-in", str(csr), "-CA", str(paths["ca.crt"]), "-CAkey", str(paths["ca.key"]),
            "-CAcreateserial", "-days", "1", "-extfile", str(extfile), "-out", str(paths[cert]))
    return paths


class OpenShellStandin(openshell_pb2_grpc.OpenShellServicer):
    """The OpenShell gateway's sandbox lifecycle on 127.0.0.1 (``start``/``stop``; a context manager)."""

    def __init__(self, workdir: Path, *, tls: bool = True, version: str = GATEWAY_VERSION) -> None:
        self.workdir, self.tls, self.version = workdir, tls, version
        self.sandboxes: dict[tuple[str, str], _Sandbox] = {}
        self.started: list[subprocess.Popen[bytes]] = []
        self.deleted: list[str] = []
        self.calls: list[str] = []
        self.port = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None
        self._certs: dict[str, Path] = {}

    # -- the gateway's lifecycle ---------------------------------------------------------------

    def start(self) -> OpenShellStandin:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        openshell_pb2_grpc.add_OpenShellServicer_to_server(self, server)
        if self.tls:
            self._certs = _make_certificates(self.workdir / "pki")
            credentials = grpc.ssl_server_credentials(
                [(self._certs["server.key"].read_bytes(), self._certs["server.crt"].read_bytes())],
                root_certificates=self._certs["ca.crt"].read_bytes(), require_client_auth=True)
            self.port = server.add_secure_port("127.0.0.1:0", credentials)
        else:
            self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        with self._lock:
            sandboxes = list(self.sandboxes.values())
            self.sandboxes.clear()
        for sandbox in sandboxes:
            self._terminate(sandbox.process)
        if self._server is not None:
            self._server.stop(grace=None).wait(timeout=10)
            self._server = None

    def __enter__(self) -> OpenShellStandin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def register_gateway(self, config_home: Path, name: str) -> None:
        """Write the CLI's registry entry for this gateway (and its mTLS files) under ``config_home``."""
        gateway_dir = config_home / "openshell" / "gateways" / name
        gateway_dir.mkdir(parents=True, exist_ok=True)
        scheme = "https" if self.tls else "http"
        (gateway_dir / "metadata.json").write_text(json.dumps(
            {"name": name, "gateway_endpoint": f"{scheme}://127.0.0.1:{self.port}", "auth_mode": "mtls"}))
        if self.tls:
            mtls = gateway_dir / "mtls"
            mtls.mkdir(exist_ok=True)
            for file in ("ca.crt", "tls.crt", "tls.key"):
                shutil.copyfile(self._certs[file], mtls / file)

    def live_processes(self) -> list[int]:
        """PIDs of sandbox processes this gateway started that are still running."""
        return [proc.pid for proc in self.started if proc.poll() is None]

    # -- the RPCs -------------------------------------------------------------------------------

    def Health(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls.append("Health")
        return openshell_pb2.HealthResponse(version=self.version)

    def CreateSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls.append("CreateSandbox")
        workspace = request.workspace_scope.workspace
        name = request.name or f"sandbox-{next(self._ids)}"
        if not workspace:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "workspace_scope.workspace is required")
        if not request.spec.command:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "spec.command is required (no image entrypoint here)")
        if len(request.service_exposures) > 1:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "the stand-in exposes one service per sandbox")
        with self._lock:
            if (workspace, name) in self.sandboxes:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, f"sandbox {name!r} already exists")
            port = _free_port()
            exposure = request.service_exposures[0] if request.service_exposures else None
            argv = [str(port) if exposure is not None and arg == str(exposure.target_port) else arg
                    for arg in request.spec.command]
            env = {**os.environ, **dict(request.spec.environment), "PORT": str(port)}
            process = subprocess.Popen(argv, env=env, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            self.started.append(process)
            sandbox = _Sandbox(id=f"sbx-{next(self._ids):06d}", name=name, workspace=workspace,
                               labels=dict(request.labels), process=process, port=port)
            if exposure is not None:
                sandbox.service_urls[exposure.service] = f"http://127.0.0.1:{port}"
            self.sandboxes[(workspace, name)] = sandbox
        return openshell_pb2.SandboxResponse(sandbox=self._message(sandbox), service_urls=sandbox.service_urls)

    def GetSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls.append("GetSandbox")
        sandbox = self.sandboxes.get((request.workspace_scope.workspace, request.name))
        if sandbox is None:
            return context.abort(grpc.StatusCode.NOT_FOUND, f"sandbox {request.name!r} not found")  # raises
        return openshell_pb2.SandboxResponse(sandbox=self._message(sandbox))

    def DeleteSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls.append("DeleteSandbox")
        with self._lock:
            sandbox = self.sandboxes.pop((request.workspace_scope.workspace, request.name), None)
        if sandbox is None:
            if not request.allow_missing:
                context.abort(grpc.StatusCode.NOT_FOUND, f"sandbox {request.name!r} not found")
            return openshell_pb2.DeleteSandboxResponse(outcome=openshell_pb2.DELETION_OUTCOME_ALREADY_ABSENT)
        self._terminate(sandbox.process)
        self.deleted.append(sandbox.name)
        return openshell_pb2.DeleteSandboxResponse(outcome=openshell_pb2.DELETION_OUTCOME_COMPLETED,
                                                   sandbox_id=sandbox.id)

    # -- helpers --------------------------------------------------------------------------------

    def _message(self, sandbox: _Sandbox) -> Any:
        if sandbox.process.poll() is not None:
            phase = openshell_pb2.SANDBOX_PHASE_ERROR
        else:
            try:
                with socket.create_connection(("127.0.0.1", sandbox.port), timeout=1):
                    phase = openshell_pb2.SANDBOX_PHASE_READY
            except OSError:
                phase = openshell_pb2.SANDBOX_PHASE_PROVISIONING
        return openshell_pb2.Sandbox(
            metadata=datamodel_pb2.ObjectMeta(id=sandbox.id, name=sandbox.name, workspace=sandbox.workspace,
                                              labels=sandbox.labels),
            status=openshell_pb2.SandboxStatus(phase=phase))

    @staticmethod
    def _terminate(process: subprocess.Popen[bytes]) -> None:
        """Stop the sandbox's process group (it leads its own session), then reap it."""
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

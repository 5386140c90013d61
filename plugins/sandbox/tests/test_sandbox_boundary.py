"""The boundary where a host gives the sandbox less than root: the seccomp filter (no privilege
needed), a root holding only CAP_SETUID/CAP_SETGID/CAP_CHOWN (what the docker provider grants),
and gVisor (``runsc do``, when installed). Each hostile snippet is also run without the part under
test, to show it would succeed there."""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import openenv_sandbox
from openenv_sandbox import Sandbox
from openenv_sandbox.syscall_filter import build_filter, unsupported

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
SRC = str(Path(openenv_sandbox.__file__).parent.parent)

# Every call the filter refuses, as a snippet that prints "<name> <errno name or ok>".
PROBES = r'''
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def report(name, fn):
    try:
        fn()
        print(name, "ok")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
def syscall(nr, *args):
    if libc.syscall(nr, *args) == -1:
        raise OSError(ctypes.get_errno(), "")
N = NUMBERS
report("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
report("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close())
report("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close())
report("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
report("socketpair", lambda: [s.close() for s in socket.socketpair()])
report("userns", lambda: syscall(N["unshare"], 0x10000000))
report("io_uring", lambda: syscall(N["io_uring_setup"], 1, ctypes.create_string_buffer(120)))
report("clone3", lambda: syscall(N["clone3"], 0, 0))
report("bpf", lambda: syscall(N["bpf"], 0, 0, 0))
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitpid(pid, 0)[1] >> 8)
'''


def _numbers() -> dict[str, int]:
    from openenv_sandbox import syscall_filter

    return syscall_filter._ARCHES[platform.machine()]


def _probe(box: Sandbox) -> dict[str, str]:
    result = box.run_python(PROBES.replace("NUMBERS", repr(_numbers())))
    assert result.exit_code == 0, result
    return dict(line.split(" ", 1) for line in result.stdout.splitlines())


@pytest.fixture(scope="module")
def offline_by_filter_only() -> Iterator[Sandbox]:
    """No network namespace: whatever keeps the execution offline is the seccomp filter."""
    with Sandbox(slots=2, uid_base=62600, isolate_network=False) as box:
        yield box


pytestmark = pytest.mark.skipif(unsupported() is not None, reason=str(unsupported()))


def test_the_filter_program_is_well_formed() -> None:
    for machine in ("x86_64", "aarch64"):
        program = build_filter(machine)
        assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 64
    assert build_filter("riscv64") is None and "riscv64" in str(unsupported("riscv64"))


def test_the_filter_refuses_networking_namespaces_and_io_uring(offline_by_filter_only: Sandbox) -> None:
    with Sandbox(slots=2, uid_base=62610, isolate_network=False, syscall_filter=False) as bare:
        without = _probe(bare)
    assert without["inet"] == without["inet6"] == without["netlink"] == "ok"  # so the test can fail
    assert without["clone3"] != "ENOSYS" and without["bpf"] != "ok"  # bpf needs privileges anyway
    got = _probe(offline_by_filter_only)
    assert got["inet"] == got["inet6"] == got["netlink"] == "EPERM"
    assert got["unix"] == got["socketpair"] == "ok" and got["fork"] == "7"
    assert got["userns"] == got["io_uring"] == got["bpf"] == "EPERM"
    assert got["clone3"] == "ENOSYS"  # so the C library falls back to clone, whose flags are checked
    assert offline_by_filter_only.boundary["network"].startswith("none: socket() limited to AF_UNIX")


def test_the_servers_loopback_port_is_unreachable_without_a_network_namespace(
        offline_by_filter_only: Sandbox) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')\n"
    try:
        with Sandbox(slots=1, uid_base=62612, isolate_network=False, syscall_filter=False) as bare:
            assert bare.run_python(code).stdout == "connected\n"
        listener.accept()[0].close()
        result = offline_by_filter_only.run_python(code)
        assert "connected" not in result.stdout and "PermissionError" in result.stderr
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_tracing_or_reading_another_process_is_refused(offline_by_filter_only: Sandbox) -> None:
    # The target is the execution's own child: same uid, and dumpable again (a uid change had made
    # it not), so only the filter stands in the way.
    code = ("import ctypes, errno, os, time\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"N = {_numbers()!r}\n"
            "ready = os.pipe()\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            "    libc.prctl(4, 1, 0, 0, 0); os.write(ready[1], b'.'); time.sleep(5); os._exit(0)\n"
            "os.read(ready[0], 1)\n"
            "rc = libc.syscall(N['ptrace'], 16, child, 0, 0)  # PTRACE_ATTACH\n"
            "print('ptrace', 'ok' if rc == 0 else errno.errorcode[ctypes.get_errno()])\n"
            "buf = ctypes.create_string_buffer(8)\n"
            "local = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)\n"
            "rc = libc.syscall(N['process_vm_readv'], child, local, 1, local, 1, 0)\n"
            "print('vm_readv', 'ok' if rc >= 0 else errno.errorcode[ctypes.get_errno()])\n"
            "os.kill(child, 9)\n")
    with Sandbox(slots=1, uid_base=62614, syscall_filter=False) as bare:
        assert bare.run_python(code).stdout == "ptrace ok\nvm_readv ok\n"
    assert offline_by_filter_only.run_python(code).stdout == "ptrace EPERM\nvm_readv EPERM\n"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the 32-bit ABI check is x86-64's")
def test_system_calls_of_the_32_bit_abi_are_refused(offline_by_filter_only: Sandbox) -> None:
    # getpid through int 0x80 (the i386 ABI, whose numbers a 64-bit filter would misread).
    code = ("import ctypes, mmap\n"
            "page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
            "page.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20; int 0x80; ret\n"
            "address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
            "print(ctypes.CFUNCTYPE(ctypes.c_int)(address)())\n")
    with Sandbox(slots=1, uid_base=62616, syscall_filter=False) as bare:
        unfiltered = int(bare.run_python(code).stdout)
    if unfiltered == -38:
        pytest.skip("this kernel has no 32-bit ABI (ia32 emulation off)")
    assert unfiltered > 0
    assert int(offline_by_filter_only.run_python(code).stdout) == -1  # -EPERM


def test_threads_subprocesses_and_asyncio_still_work(offline_by_filter_only: Sandbox) -> None:
    code = ("import asyncio, subprocess, threading\n"
            "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
            "print(subprocess.run(['/bin/echo', 'child'], capture_output=True, text=True).stdout.strip())\n"
            "asyncio.run(asyncio.sleep(0)); print('asyncio')\n")
    result = offline_by_filter_only.run_python(code)
    assert result.stdout == "thread\nchild\nasyncio\n", result
    command = offline_by_filter_only.run_command("echo hi | tr a-z A-Z && ls / | wc -l")
    assert command.exit_code == 0 and command.stdout.startswith("HI\n"), command


MINIMAL_CAPS_SCRIPT = r"""
import json, os
from openenv_sandbox import Limits, Sandbox
from openenv_sandbox.host import processes_of, server_process
out = {"caps": server_process()["capabilities"]}
with Sandbox(slots=2, uid_base=62620) as box:
    out["uid"] = box.run_python("import os; print(os.getuid())").stdout.strip()
    tree = box.make_tree()
    # The agent locks its own directories; root without CAP_DAC_OVERRIDE must still take them back.
    out["lock"] = box.run_command("mkdir -p a/b && echo x > a/b/f && chmod 000 a/b a", workdir=tree).exit_code
    out["again"] = box.run_command("chmod 700 a a/b && cat a/b/f", workdir=tree).stdout.strip()
    box.run_command("chmod 000 a", workdir=tree)
    out["own_dir"] = box.run_command("mkdir -p x/y && chmod 000 x && echo done").stdout.strip()
    out["stray"] = box.run_python("import os, time\nif os.fork() == 0:\n    os.setsid(); time.sleep(30)\nprint('p')",
                                  limits=Limits(wall_time_s=5)).stdout.strip()
    out["left"] = processes_of(box.uids)
    box.remove_tree(tree)
    out["tree_removed"] = not tree.exists()
    out["privileges"] = box.boundary["privileges"]
    root = box.root
out["root_removed"] = not root.exists()
print(json.dumps(out))
"""


@root_only
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv")
def test_root_with_only_setuid_setgid_and_chown_drops_privileges_and_cleans_up() -> None:
    """What the docker provider grants an env whose manifest asks for ``sandbox.drop_privileges``."""
    out = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-all,+setuid,+setgid,+chown", "--",
                          sys.executable, "-c", MINIMAL_CAPS_SCRIPT], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC})
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(report["caps"]) == ["CHOWN", "SETGID", "SETUID"]
    assert report["uid"] == "62620" and report["privileges"].startswith("dropped to uid/gid 62620..62621")
    assert report["lock"] == 0 and report["again"] == "x" and report["own_dir"] == "done"
    assert report["stray"] == "p" and report["left"] == []
    assert report["tree_removed"] and report["root_removed"]


GVISOR_SCRIPT = r"""
import json
from openenv_sandbox import Sandbox
with Sandbox(slots=2, uid_base=62630) as box:
    b = box.boundary
    r = box.run_python("import os, socket\nprint(os.getuid())\nsocket.create_connection(('10.0.0.1', 80), timeout=1)")
    print(json.dumps({"gvisor": b["gvisor"], "outermost": b["outermost_boundary"], "uid": r.stdout.strip(),
                      "stderr": r.stderr[-200:], "network": b["network"], "enforced": b["enforced"]}))
"""


@root_only
@pytest.mark.skipif(shutil.which("runsc") is None, reason="gVisor's runsc is not installed (apt-get install runsc)")
def test_under_gvisor_the_boundary_says_so(tmp_path: Path) -> None:
    """``runsc do`` runs the sandbox on gVisor's kernel, with this host's files."""
    cmd = ["runsc", "--root", str(tmp_path / "state"), "--network=none", "do", "/usr/bin/env",
           f"PYTHONPATH={SRC}", sys.executable, "-c", GVISOR_SCRIPT]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["gvisor"] is True and report["outermost"].startswith("gVisor sandbox")
    assert report["uid"] == "62630" and "Errno" in report["stderr"]
    assert any(line.startswith("gVisor: every system call") for line in report["enforced"])
    # And outside gVisor the same detection says no.
    from openenv_sandbox.host import under_gvisor

    assert under_gvisor() is False

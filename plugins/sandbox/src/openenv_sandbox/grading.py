"""Grading in a separate box: ``grade_copy`` runs a task's check on a *copy* of the agent's work.

What the shell and coding environments grade with (and any env that runs an agent's commands in a
sandbox tree). Promises of ``grade_copy(sandbox, check, tree=..., files=...)``:

* The check runs in a fresh folder made for this grading only: a copy of ``tree``
  (``trees.copy``: symlinks copied as links, never followed; hard links, devices and fifos left
  out; bounded in entries and bytes) and/or the ``files`` given (e.g. the submitted solution). The
  agent's own tree is never the working directory, and it is never changed.
* The check's source comes from the caller (the env's own task data), never from the tree; it is
  run by ``exec`` inside a small trusted wrapper, in a fresh ``openenv_sandbox`` execution:
  ``python -I`` (the zygote's isolated interpreter), no bytecode written, the copy as working
  directory but **not** on ``sys.path``, no network, the given limits, a minimal environment, and
  the process made undumpable first (nothing it starts can trace it or read its memory).
* It runs as the slot's *grader uid* (``uid_base + GRADER_UID_OFFSET + slot``), a uid no agent
  command ever runs as, when the server may switch users (root); as non-root every execution,
  grading included, runs as the server's own uid (nothing can switch it), which ``Verdict``
  reports as ``grader_uid=None``. ``/tmp`` is private (a fresh tmpfs in a mount namespace) where
  the server may mount (root with ``CAP_SYS_ADMIN``); otherwise it is the shared one, and
  ``TMPDIR``/``HOME`` point into the grading folder.
* The verdict is read fail-closed from a pipe only the wrapper holds (``verdict_fd``, not
  inherited by anything the check starts): the check passes only when it ran to its end (or
  called ``sys.exit(0)``), the execution exited 0 within its limits, and exactly one well-formed
  verdict carrying this grading's nonce arrived. Anything else (a failing assertion, a crash, a
  timeout, no verdict, two verdicts, a malformed one, a tree too big to copy) is ``passed=False``
  with ``error`` naming why.
* The folder is removed afterwards; nothing of the grading survives it (the runner kills every
  process of the grader uid when the execution ends).

* With ``payload=True`` the str the check leaves in its global ``__openenv_payload__`` follows the
  verdict line and comes back as ``Verdict.payload``: data from the check's process, to be parsed
  as data only (it is as trustworthy as that process).

What this does **not** stop: code the check itself imports or ``exec``s in its own process decides
that process's verdict from inside (it can read the nonce and write the verdict, or make a
comparison lie). A caller must not compare in the process that runs agent code: the shell env's
checks run it in probe processes and compare what it prints; the coding env's grading process only
records the solution's results as plain data (``payload=True``) and the server replays the test on
them (``openenv_env_coding.replay``). World-readable files outside the copy stay readable (a
symlink in the copy to ``/etc/passwd`` resolves).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv_sandbox import trees
from openenv_sandbox.limits import ExecResult, Limits

if TYPE_CHECKING:
    from openenv_sandbox.runner import Sandbox

__all__ = ["GIT_DEFUSE_ENV", "Verdict", "defuse_git", "grade_copy", "last_error_line"]

#: The descriptor the verdict pipe has in the grading process.
VERDICT_FD = 200
#: Git settings forced on a check (``GIT_CONFIG_*`` outranks every config file): a hook, an
#: fsmonitor command or a pager planted in the agent's repository must not run while grading.
_GIT_DEFUSE = {"core.hooksPath": "/dev/null", "core.fsmonitor": "false", "core.pager": "cat",
               "core.sshCommand": "false", "diff.external": "", "core.editor": "false"}
GIT_DEFUSE_ENV = {"GIT_CONFIG_COUNT": str(len(_GIT_DEFUSE)),
                  **{f"GIT_CONFIG_KEY_{i}": k for i, k in enumerate(_GIT_DEFUSE)},
                  **{f"GIT_CONFIG_VALUE_{i}": v for i, v in enumerate(_GIT_DEFUSE.values())}}
#: Sections of a repository's config that can make git run a command: dropped from the copy.
_GIT_EXEC_SECTIONS = re.compile(r"^\s*\[\s*(filter|alias|include|includeif|credential|diff|merge)\b", re.I)

#: The trusted wrapper around a check: cwd off ``sys.path``, undumpable, then the check, then the
#: verdict on the pipe (reached only when the check ran to its end or exited 0), followed by the
#: check's ``__openenv_payload__`` when the caller asked for one.
_WRAPPER = """\
import os as _os, sys as _sys
_sys.path[:] = [_p for _p in _sys.path if _p and _os.path.realpath(_p) != _os.path.realpath(_os.getcwd())]
import ctypes as _ctypes
if _ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    raise SystemExit('the grader could not make itself undumpable')
_write, _fd, _line, _str = _os.write, VERDICT_FD, NONCE_LINE, str
del _ctypes
_globals = {'__name__': '__main__', '__builtins__': __builtins__}
try:
    exec(compile(CHECK, '<check>', 'exec'), _globals)
except SystemExit as _exit:
    if _exit.code not in (None, 0):
        raise
_payload = _globals.get('__openenv_payload__', '') if WANT_PAYLOAD else ''
_write(_fd, _line + (_payload.encode('utf-8', 'replace') if type(_payload) is _str else b''))
"""


@dataclass
class Verdict:
    """One grading's outcome: ``passed`` only on a clean, complete, single verdict (fail closed)."""

    passed: bool
    #: Why it did not pass ("" when it did): the exception the check raised (its name), a timeout, ...
    error: str
    #: The uid the check ran as (None: the server's own, when users cannot be switched).
    grader_uid: int | None
    #: What ``/tmp`` was for the check ("private (a fresh tmpfs)" or "shared (...)").
    tmp: str
    seconds: float
    #: The execution itself (None when it never started: the copy was refused).
    result: ExecResult | None = None
    #: What the check left in its global ``__openenv_payload__`` (a str) when it ended: data for
    #: the caller to judge, as untrusted as everything else the grading process produced ("" when
    #: it left none or the verdict did not pass).
    payload: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``passed``, ``error``, ``grader_uid``, ``tmp`` and ``duration_s`` (the seconds, rounded)."""
        return {"passed": self.passed, "error": self.error, "grader_uid": self.grader_uid, "tmp": self.tmp,
                "duration_s": round(self.seconds, 4)}


def _git_hooks(relative: str) -> bool:
    """A repository's hooks folder (left out of the copy: ``defuse_git`` would drop it anyway)."""
    parts = relative.split(os.sep)
    return len(parts) >= 2 and parts[-1] == "hooks" and parts[-2] == ".git"


def defuse_git(tree: str | os.PathLike[str]) -> None:
    """Drop hooks and command-running config of every git repository in ``tree`` (a copy)."""
    for git_dir in [p for p in Path(tree).rglob(".git") if p.is_dir() and not p.is_symlink()]:
        hooks = git_dir / "hooks"
        if hooks.is_symlink() or hooks.is_file():
            hooks.unlink()
        elif hooks.is_dir():
            shutil.rmtree(hooks)
        config = git_dir / "config"
        if config.is_symlink():
            config.unlink()
        elif config.is_file():
            kept, dropping = [], False
            for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.lstrip().startswith("["):
                    dropping = bool(_GIT_EXEC_SECTIONS.match(line))
                if not dropping:
                    kept.append(line)
            config.write_text("\n".join(kept) + "\n", encoding="utf-8")


def last_error_line(result: ExecResult) -> str:
    """The last non-blank line of the execution's stderr (at most 300 characters), or ""."""
    lines = [ln for ln in result.stderr.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _why(result: ExecResult, got: bytes, line: bytes, payload: bool = False) -> str:
    """Why the execution's verdict is not a pass ("" when it is)."""
    if result.timed_out:
        return f"the grader ran past its wall-clock limit ({result.limits.get('wall_time_s')} s)"
    if result.exit_code is None or result.killed_by:
        return f"the grader crashed ({result.killed_by or 'no exit status'})"
    if result.exit_code != 0:
        # the exception's name only: its message (expected values, random inputs) stays with the grader
        kind = last_error_line(result).partition(":")[0].strip()
        return f"the check failed (exit code {result.exit_code})" + (f": {kind}" if kind.isidentifier() else "")
    if not got:
        return "the grader wrote no verdict (it ended before the check finished)"
    if got.count(line) > 1:
        return "the grader wrote more than one verdict"
    if not got.startswith(line) or (got != line and not payload):  # the line, then a payload if asked for
        return f"the grader's verdict is malformed ({bytes(got[:80])!r})"
    return ""


def grade_copy(sandbox: Sandbox, check: str, *, tree: str | os.PathLike[str] | None = None,
               files: Mapping[str, str] | None = None, limits: Limits | None = None,
               env: Mapping[str, str] | None = None, git: bool = False, max_files: int = 5000,
               max_bytes: int = 64 * 1024 * 1024, payload: bool = False) -> Verdict:
    """Run ``check`` (Python source) on a copy of ``tree`` plus ``files`` in a fresh grading
    execution of ``sandbox``; never raises for a bad check or tree (see the module docstring).

    ``git``: defuse the copy's git repositories (hooks and command-running config dropped, the
    ``GIT_DEFUSE_ENV`` settings forced). ``payload``: the check may hand back data: the str it
    leaves in its global ``__openenv_payload__`` follows the verdict line on the pipe and is
    ``Verdict.payload`` (bounded by ``limits.output_bytes``; as untrusted as the check's process:
    parse it as data only). Without it, anything after the verdict line is a malformed verdict."""
    start = time.monotonic()
    box = sandbox.make_tree(prefix="grade-")
    box.chmod(0o711)  # the grader uid passes through to its own folder, lists nothing
    work = box / "work"
    uid: int | None = None
    try:
        try:
            if tree is not None:
                trees.copy(tree, work, max_files=max_files, max_bytes=max_bytes, skip=_git_hooks if git else None)
            else:
                work.mkdir(mode=0o700)
        except (trees.TreeTooLarge, OSError) as exc:
            return Verdict(False, f"the workspace could not be copied for grading: {exc}", None, "",
                           time.monotonic() - start)
        for name, text in (files or {}).items():
            target = (work / name).resolve()
            if work.resolve() not in target.parents:
                raise ValueError(f"grading file {name!r} would land outside the grading folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            target.write_text(text, encoding="utf-8")
        if git:
            defuse_git(work)
        nonce = secrets.token_hex(16)
        line = f"openenv-verdict pass {nonce}\n".encode()
        code = (_WRAPPER.replace("VERDICT_FD", str(VERDICT_FD)).replace("NONCE_LINE", repr(line))
                .replace("WANT_PAYLOAD", repr(payload)).replace("CHECK", repr(check)))
        run_env = {**(env or {}), **(GIT_DEFUSE_ENV if git else {}), "TMPDIR": str(work), "HOME": str(work)}
        got = bytearray()
        result = sandbox._execute({"code": code, "argv": None, "verdict_fd": VERDICT_FD}, limits, work, None,
                                  run_env, verdict=got)
        uid = result.boundary.get("uid") if result.boundary.get("uid") != os.getuid() else None
        why = _why(result, bytes(got), line, payload)
        data = "" if why else bytes(got[len(line):]).decode("utf-8", "replace")
        return Verdict(not why, why, uid, str(result.boundary.get("tmp", "unknown")), time.monotonic() - start,
                       result, data)
    finally:
        trees.remove(box)

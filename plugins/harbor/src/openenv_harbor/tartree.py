"""Tar streams for the Kubernetes runtime's grading (``openenv_harbor.k8s``), on this machine only.

The agent's ``/app`` leaves its Pod as a tar and the verifier's ``/logs/verifier`` leaves the grading
Pod as one; nothing of either is unpacked here. :func:`copy_workspace` rewrites the workspace into
the grading tree member by member (git hooks dropped, the config sections that run commands
removed, only files, folders and symlinks, setuid bits cleared); :func:`add_tests` adds the task's
own ``tests/`` from the task folder, read-only; :func:`read_reward_files` recreates only the two
reward files, as they were, for :func:`openenv_harbor.box.read_reward` to judge.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from openenv_harbor.gitdefuse import defused_config

__all__ = ["add_tests", "copy_workspace", "defused_member", "read_reward_files"]

#: The reward files the verifier may write (the other runtimes read the same two).
REWARD_FILES = ("verifier/reward.txt", "verifier/reward.json")


def defused_member(name: str, data: bytes) -> bytes | None:
    """A workspace member's content as the grader gets it: a repository's hooks dropped (None) and its
    config's command-running sections removed."""
    parts = name.split("/")
    if ".git" in parts:
        rest = parts[parts.index(".git") + 1:]
        if rest[:1] == ["hooks"]:
            return None
        if rest == ["config"]:
            return defused_config(data.decode("utf-8", "replace")).encode()
    return data


def copy_workspace(raw: bytes, dst: tarfile.TarFile) -> None:
    """Add the members of the workspace tar ``raw`` to ``dst`` under ``app/``, defused (see the module
    docstring); a member that would land outside ``app/`` is skipped. ``tarfile.TarError`` when
    ``raw`` is not a tar."""
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as src:
        for member in src:
            name = os.path.normpath(member.name).lstrip("/")
            if name in (".", "") or name.startswith("..") or not (member.isfile() or member.isdir() or member.issym()):
                continue
            data = b""
            if member.isfile():
                extracted = src.extractfile(member)
                defused = defused_member(name, extracted.read() if extracted else b"")
                if defused is None:
                    continue
                data = defused
            elif member.isdir() and defused_member(name + "/x", b"") is None:
                continue  # a hooks folder
            copy = tarfile.TarInfo(f"app/{name}")
            copy.type, copy.linkname, copy.mtime = member.type, member.linkname, member.mtime
            copy.mode, copy.size = member.mode & 0o777, len(data)
            dst.addfile(copy, io.BytesIO(data) if member.isfile() else None)


def add_tests(dst: tarfile.TarFile, tests: Path) -> None:
    """Add the task's ``tests/`` folder to ``dst`` under ``tests/``: root-owned, read-only (executable
    bits kept), symlinks and special files left out."""
    for path in sorted(tests.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            continue
        info = dst.gettarinfo(str(path), f"tests/{path.relative_to(tests)}")
        info.uid, info.gid, info.uname, info.gname = 0, 0, "", ""
        info.mode = 0o555 if path.is_dir() or info.mode & 0o111 else 0o444
        if path.is_file():
            with path.open("rb") as f:
                dst.addfile(info, f)
        else:
            dst.addfile(info)


def read_reward_files(tar: bytes, folder: Path) -> None:
    """Recreate /logs/verifier's reward files in ``folder`` as they were (a symlink stays a symlink, never
    followed), so that read_reward judges them as the other runtimes do."""
    with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as src:
        for member in src:
            name = os.path.normpath(member.name)
            if name not in REWARD_FILES:
                continue
            target = folder / Path(name).name
            if member.issym() or member.islnk():
                target.symlink_to(member.linkname)
            elif member.isdir():
                target.mkdir()
            elif member.isfile():
                extracted = src.extractfile(member)
                target.write_bytes(extracted.read() if extracted else b"")  # the tar itself is bounded
            else:
                target.mkdir()  # a fifo or device: "not a regular file"

"""Working trees handed to a slot's uid for one execution and back afterwards.

Everything here works for a root that holds ``CAP_CHOWN`` and no ``CAP_DAC_OVERRIDE`` /
``CAP_FOWNER`` (what the docker provider grants an env that asks to drop privileges): root never
has to enter a directory it does not own. Handing over goes bottom-up (a directory changes owner
only after everything below it did); taking back goes top-down (a directory is first chowned to
root, then given ``u+rwx`` as its owner, then listed).

Promises:

* ``hand_over(tree, uid)``: every file and directory of ``tree`` belongs to ``uid``, links never
  followed; a hard link to a file elsewhere (``st_nlink > 1``) is skipped, so a planted link
  cannot make us chown a file outside the tree.
* ``reclaim(tree)``: the tree belongs to us (our effective uid and gid), its top directory mode
  0700, every directory at least ``u+rwx``: the next session to get the same slot uid cannot
  reach it, and ``remove`` can delete it.
* ``remove(tree)``: ``reclaim`` then delete; never raises.
* ``copy(src, dest)``: a snapshot of ``src`` in the new folder ``dest``: directories, regular
  files (by content, opened without following links) and symlinks (as links, never followed);
  hard-linked files, devices, fifos and sockets are left out, set-id bits dropped. More than
  ``max_files`` entries or ``max_bytes`` of content raises ``TreeTooLarge`` (``dest`` removed).

Callers run these only while no process of the slot's uid is alive (the runner sweeps first).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["TreeTooLarge", "copy", "hand_over", "reclaim", "remove"]


def hand_over(tree: str | os.PathLike[str], uid: int) -> None:
    """Give ``tree`` to ``uid`` (bottom-up; see the module docstring)."""
    top = os.fspath(tree)
    for dirpath, dirnames, filenames in os.walk(top, topdown=False, followlinks=False):
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
                continue
            os.lchown(path, uid, uid)
    os.lchown(top, uid, uid)


def reclaim(tree: str | os.PathLike[str]) -> None:
    """Take ``tree`` back for our effective uid and gid; top-down."""
    uid, gid = os.geteuid(), os.getegid()
    top = os.fspath(tree)
    try:
        if not stat.S_ISDIR(os.lstat(top).st_mode):
            return
        os.lchown(top, uid, gid)
        os.chmod(top, 0o700)  # first: nobody else may enter while the rest is taken back
    except OSError:
        return
    pending = [top]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    os.lchown(entry.path, uid, gid)
                    # A real directory (lstat) and no process of the slot runs now, so nothing can
                    # swap it for a link before this chmod; as its owner we may always chmod it.
                    os.chmod(entry.path, stat.S_IMODE(st.st_mode) | 0o700)
                    pending.append(entry.path)
                elif st.st_nlink == 1:
                    os.lchown(entry.path, uid, gid)
            except OSError:
                continue


def remove(tree: str | os.PathLike[str]) -> None:
    """Delete ``tree`` whoever owns its parts (``reclaim`` first); never raises."""
    if not os.path.lexists(tree):
        return
    reclaim(tree)
    shutil.rmtree(Path(tree), ignore_errors=True)


class TreeTooLarge(ValueError):
    """A tree to copy holds more files or bytes than the copy may take."""


def _copy_file(src: str, dest: str, mode: int, budget: list[int]) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(src, flags)
    except PermissionError:  # a file its owner made unreadable: we own it now (reclaim), so we may chmod it
        os.chmod(src, mode | stat.S_IRUSR, follow_symlinks=False)
        fd = os.open(src, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            while chunk := os.read(fd, 1 << 16):
                budget[1] -= len(chunk)
                if budget[1] < 0:
                    raise TreeTooLarge
                os.write(out, chunk)
            os.fchmod(out, mode & 0o777)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def copy(src: str | os.PathLike[str], dest: str | os.PathLike[str], *, max_files: int = 10_000,
         max_bytes: int = 256 * 1024 * 1024, skip: Callable[[str], bool] | None = None) -> int:
    """Copy ``src`` into the new directory ``dest`` (see the module docstring); the entries copied.
    ``skip(relative_path)``: True leaves that entry (and all below it) out.

    Run it only while no process can change ``src`` (between executions: the runner sweeps)."""
    top, out_top = os.fspath(src), os.fspath(dest)
    os.mkdir(out_top, 0o700)
    budget = [max_files, max_bytes]
    try:
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            rel = os.path.relpath(dirpath, top)
            target_dir = out_top if rel == "." else os.path.join(out_top, rel)
            for name in dirnames + filenames:
                budget[0] -= 1
                if budget[0] < 0:
                    raise TreeTooLarge
                path, target = os.path.join(dirpath, name), os.path.join(target_dir, name)
                if skip is not None and skip(os.path.normpath(os.path.join(rel, name))):
                    continue
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(path), target)
                elif stat.S_ISDIR(st.st_mode):
                    os.mkdir(target, 0o700)
                    os.chmod(target, (st.st_mode & 0o777) | stat.S_IRWXU)
                elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    _copy_file(path, target, st.st_mode, budget)
            dirnames[:] = [d for d in dirnames if os.path.isdir(os.path.join(target_dir, d))
                           and not os.path.islink(os.path.join(target_dir, d))]
    except TreeTooLarge:
        remove(out_top)
        raise TreeTooLarge(f"the tree has more than {max_files} entries or {max_bytes} bytes of files") from None
    except BaseException:
        remove(out_top)
        raise
    return max_files - budget[0]

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

Callers run these only while no process of the slot's uid is alive (the runner sweeps first).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

__all__ = ["hand_over", "reclaim", "remove"]


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

"""The ``--stream FILE`` file: opened once, checked on the open descriptor, never reopened.

Shared by the runner (which checks and opens it before the program starts) and the elt
profiler's text sink (which writes it). The runner used to check the path at start-up (symlinks planted by another user in
``/tmp``) and the sink opened it again later with a plain ``open()``: a symlink swapped in
between was followed, and its target truncated. Now the runner opens the file here, at the
check (:func:`prepare`), and the sink made for that path in the same process takes that
very file (:func:`take`); a process with nothing prepared (a child profiled through the
environment, a library user) opens it with the same :func:`open_stream`.

How :func:`open_stream` opens: ``O_NOFOLLOW`` first (a missing file is created with
``O_EXCL``), so a plain name is never led elsewhere. A name that is a symlink on purpose (``/dev/stdout``, a link of one's own) is
followed only as ``fs.protected_symlinks`` would follow it, checked again once open, and
the opened file must be the one the path names then (same device and inode); else
nothing is written. A regular file is truncated only after these checks (``ftruncate``
on the descriptor, never ``O_TRUNC`` on the path).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO

from profkit._atomic import refuse_planted_symlinks

_FLAGS = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: what ``open(O_NOFOLLOW)`` of a symlink fails with (Linux, macOS: ELOOP; FreeBSD: EMLINK)
_IS_A_LINK = (errno.ELOOP, errno.EMLINK)

#: absolute path -> (the pid that opened it, the file), from :func:`prepare`
_PREPARED: dict[str, tuple[int, IO[str]]] = {}


def open_stream(path: str) -> IO[str]:
    """Open ``path`` for event lines (created, or truncated if a regular file); see the
    module docstring. Raises :class:`OSError` (``PermissionError`` for a refused link)."""
    fd = _open_no_link(path)
    if fd is None:
        fd = _open_through_link(path)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.ftruncate(fd, 0)
        return open(fd, "w", encoding="utf-8", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def _open_no_link(path: str) -> int | None:
    """``path`` opened without following a symlink at its end (created if missing, with
    ``O_EXCL``: a link appearing meanwhile is not followed either); None if it is one."""
    for _ in range(3):
        try:
            return os.open(path, _FLAGS | _NOFOLLOW)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if _NOFOLLOW and exc.errno in _IS_A_LINK:
                return None
            raise
        try:
            return os.open(path, _FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue  # created meanwhile: look again at what it is
    raise FileExistsError(errno.EEXIST, "the file keeps changing while it is opened", path)


def _open_through_link(path: str) -> int:
    """``path`` is a symlink: open what it names if the protected-symlinks rule allows it,
    and keep the descriptor only if the path still names that file once it is open."""
    refuse_planted_symlinks(path)
    fd = os.open(path, _FLAGS | os.O_CREAT, 0o666)
    try:
        refuse_planted_symlinks(path)
        opened, named = os.fstat(fd), os.stat(path)
        if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
            raise PermissionError(errno.EACCES, "the file changed while it was opened", path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def prepare(path: str) -> None:
    """Open ``path`` now, checked (the runner, before the program starts); the sink for
    that path in this process takes this file instead of opening the path again."""
    key = os.path.abspath(path)
    file = open_stream(path)
    discard(key)
    _PREPARED[key] = (os.getpid(), file)


def take(path: str) -> IO[str] | None:
    """The file :func:`prepare` opened for ``path`` in this process (handed over once)."""
    entry = _PREPARED.pop(os.path.abspath(path), None)
    if entry is None:
        return None
    pid, file = entry
    if pid != os.getpid():  # a forked child: the parent's file is not its own to write
        return None
    return file


def discard(path: str | None = None) -> None:
    """Close what was prepared and not taken (for ``path``, or all): a run whose sink
    never started (not trace mode, an engine that opens the file itself)."""
    keys = list(_PREPARED) if path is None else [os.path.abspath(path)]
    for key in keys:
        entry = _PREPARED.pop(key, None)
        if entry is not None and entry[0] == os.getpid():
            entry[1].close()

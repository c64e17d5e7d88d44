"""Output files: written atomically, never over an input, and never over a device.

Every file profkit writes (saved profiles, exports, perf maps, symbolized transcripts)
goes through :class:`AtomicOutput`: a temp file in the target's directory, renamed over
the target only once complete, so a reader (``perf``, a browser, another profkit) never
sees half a file and a crash or a full disk never destroys the previous one.

Two cases where a rename would be wrong, found by pointing ``-o`` at them:

* a **symlink**: renaming over it would replace the link itself; we replace the file it
  points to, as a plain ``open(path, "w")`` would have written there;
* an existing **non-regular file** (``/dev/stdout``, ``/dev/null``, a FIFO): renaming over
  it would swap the device node for a regular file (as root: ``/dev/full`` became a file).
  Those are opened and written in place; atomicity means nothing for them.

Shared directories (``/tmp``): a symlink in a sticky, world-writable directory is followed
only if it belongs to us or to the directory's owner — the rule Linux applies itself with
``fs.protected_symlinks`` — so another user cannot plant ``/tmp/out.json -> ~/.bashrc``
(dangling or not) and have profkit write through it. The temp file is created with
``O_EXCL | O_NOFOLLOW``; a new file's permissions come from the kernel applying the umask
at creation (the umask is never changed, not even briefly: that raced other threads).

A writer killed mid-write leaves its temp file: it is the target's fixed temp name, held
with ``flock`` while written, so the next write of that target finds it unlocked and
replaces it without listing the directory (:func:`_claim_fixed`).

File errors are plain :class:`OSError` (callers add the file name and their own
wording); this module imports only :mod:`profkit.errors` and :mod:`profkit._output`, so any
layer may use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from types import TracebackType

from profkit import _output
from profkit.errors import ProfkitError, UsageError

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import BinaryIO

try:
    from fcntl import LOCK_EX, LOCK_NB
    from fcntl import flock as _flock
except ImportError:  # pragma: no cover - not POSIX: only the temp names of our own
    _flock = None  # type: ignore[assignment]

#: Set by the CLI's Ctrl-C handler. Python can lose a KeyboardInterrupt (raised inside a
#: ``__del__``, a weakref callback or an at-fork hook, it is only reported as "ignored"), and
#: the command would then publish its output as if never interrupted: this flag is checked
#: again at the moment of publishing, so an interrupted command publishes nothing.
_interrupted = False


def note_interrupt() -> None:
    """Record that the user interrupted the command (called from a SIGINT handler)."""
    global _interrupted
    _interrupted = True


def interrupted() -> bool:
    """Whether :func:`note_interrupt` was called in this process."""
    return _interrupted


class AtomicOutput:
    """A binary file written in pieces and published by rename only when complete.

    ``with AtomicOutput(path) as fh: fh.write(...)``: on success the data replaces
    ``path`` (an existing file's permission bits are kept; a new file gets ``0o666`` minus
    the umask, like ``open``); on any exception the temp file is removed and ``path`` is
    untouched.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = os.fspath(path)
        self._fsync = fsync
        self._tmp: str | None = None
        self._fh: BinaryIO | None = None
        self._lock: int | None = None  #: holds the fixed temp name's lock (see _claim_fixed)

    def __enter__(self) -> BinaryIO:
        try:
            st: os.stat_result | None = os.stat(self.path)  # follows symlinks
        except FileNotFoundError:
            st = None
        refuse_planted_symlinks(self.path)
        if (st is not None and stat.S_ISDIR(st.st_mode)) or self.path.endswith(os.sep):
            # "out/" names a directory even when it does not exist: never a file "out"
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.path)
        if st is not None and not stat.S_ISREG(st.st_mode):
            fd = os.open(self.path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
            self._fh = _checked(fd, self.path)  # a device or FIFO: written in place
            return self._fh
        target = os.path.realpath(self.path)  # replace what a symlink points to, keep the link
        # An existing file keeps its bits (set on the temp before the rename); a new one is
        # created 0666 and the kernel applies the umask, as open() would.
        self._mode = st.st_mode & 0o7777 if st is not None else None
        create_mode = 0o600 if st is not None else 0o666
        fd, self._tmp, self._lock = _make_temp(
            os.path.dirname(target), os.path.basename(target), create_mode
        )
        self._target = target
        self._fh = _checked(fd, self._tmp)
        return self._fh

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._fh is not None
        try:
            if exc_type is None and self._tmp is not None:
                if _interrupted:
                    raise KeyboardInterrupt  # (lost on its way here: see note_interrupt)
                self._fh.flush()
                if self._fsync:
                    os.fsync(self._fh.fileno())
                if self._mode is not None:
                    os.fchmod(self._fh.fileno(), self._mode)  # the temp was made 0600
            self._fh.close()  # a device's write error (ENOSPC) surfaces here at the latest
            if exc_type is None and self._tmp is not None:
                os.replace(self._tmp, self._target)
                self._tmp = None
        finally:
            if self._tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self._tmp)
            if self._lock is not None:  # after the rename or unlink: see _claim_fixed
                os.close(self._lock)
                self._lock = None


def _checked(fd: int, name: str) -> BinaryIO:
    """A :class:`~profkit._output.CheckedFile`: ``BufferedWriter`` can lose an ENOSPC
    that follows a short write, and publish a truncated file as complete."""
    return _output.CheckedFile(fd, name=name)  # type: ignore[return-value]


def _make_temp(directory: str, base: str, mode: int = 0o600) -> tuple[int, str, int | None]:
    """A new temp file in ``directory`` for target ``base`` (``mode`` minus the umask):
    ``(fd, name, the descriptor holding its lock or None)``.

    The target's own fixed name when free (:func:`_claim_fixed`), else, while another writer
    of the same target is at work, ``tempfile.mkstemp``'s way as
    ``.<base>.<host>-<pid>.<random>.tmp``. Written out because importing :mod:`tempfile`
    (with :mod:`shutil` and :mod:`random`) costs several ms of every ``profkit run``
    start-up, for one file name.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    owner = _temp_owner()
    claimed = _claim_fixed(directory, base, owner, flags, mode)
    if claimed is not None:
        return claimed
    _remove_orphans(directory, base, owner)
    for _ in range(100):
        name = os.path.join(directory, f".{base}.{owner}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, flags, mode), name, None
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", directory)


def _claim_fixed(
    directory: str, base: str, owner: str, flags: int, mode: int
) -> tuple[int, str, int] | None:
    """The target's fixed temp name ``.<base>.<host>.tmp``, created afresh and locked
    (``flock``) until renamed; None when another live writer holds it (or no ``flock``).

    Why a fixed name: finding a killed writer's temp file among random names meant listing
    the whole directory on every write (120 ms a write in a directory of 100,000 files).
    Here the lock tells: a file at the fixed name that nobody holds locked is a dead
    writer's, removed under our lock and created again. A name is removed or renamed only
    by the lock's holder, and each holder checks once locked that the name is still its
    own file, so two writers never share one. The lock stays held (a duplicate descriptor,
    the third value) until the rename is done.
    """
    if _flock is None:
        return None
    path = os.path.join(directory, f".{base}.{owner.rpartition('-')[0]}.tmp")
    for _ in range(3):
        fresh = True
        try:
            fd = os.open(path, flags, mode)
        except FileExistsError:
            fresh = False
            try:
                fd = os.open(path, flags & ~(os.O_CREAT | os.O_EXCL))
            except OSError:
                return None  # a symlink, another user's file: not ours to reuse
        except OSError:
            return None
        try:
            ours = _lock_if_ours(fd, path)
            if ours and fresh:
                return fd, path, os.dup(fd)  # the duplicate shares the lock
            if ours:
                os.unlink(path)  # nobody held it: a killed writer's
        except OSError:  # no flock on this filesystem: leave no file of ours behind
            ours = False
            if fresh:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        os.close(fd)
        if not ours:
            return None
    return None


def _lock_if_ours(fd: int, path: str) -> bool:
    """Lock ``fd`` (not waiting) and say whether it is our regular file still named ``path``;
    raises :class:`OSError` where the filesystem has no locks."""
    assert _flock is not None
    try:
        _flock(fd, LOCK_EX | LOCK_NB)
    except BlockingIOError:
        return False  # a live writer holds it
    opened = os.fstat(fd)
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False  # renamed or removed since we opened it
    return (
        stat.S_ISREG(opened.st_mode)
        and opened.st_uid == os.geteuid()
        and (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)
    )


def _temp_owner() -> str:
    """``<host>-<pid>``: who writes a temp file, so a later writer can tell an orphan."""
    host = "".join(c for c in os.uname().nodename if c.isalnum())[:32] or "host"
    return f"{host}-{os.getpid()}"


def _remove_orphans(directory: str, base: str, owner: str) -> None:
    """Remove temp files of ``base`` left by a writer of this host that no longer exists.

    A writer killed with SIGKILL (or a power cut) between creating its temp file and the
    rename leaves ``.<base>.<host>-<pid>.<random>.tmp`` behind; the next write of the same
    target removes it. Only our own regular files are touched, only those named by this
    host (a shared filesystem's other hosts have their own pids), and only when that pid is
    gone: a live writer's temp file is never removed.
    """
    host = owner.rpartition("-")[0]
    prefix = f".{base}.{host}-"
    try:
        entries = [e for e in os.scandir(directory) if e.name.startswith(prefix)]
    except OSError:
        return
    for entry in entries:
        pid_text, _, rest = entry.name[len(prefix) :].partition(".")
        if not pid_text.isdigit() or len(rest) != 16 or not rest.endswith(".tmp"):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                continue
            if _alive(int(pid_text)):
                continue
            os.unlink(entry.path)
        except OSError:
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, someone else's
    return True


def write_atomic(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` through :class:`AtomicOutput`."""
    with AtomicOutput(path, fsync=fsync) as fh:
        fh.write(data)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two names are one existing file (``./x`` and ``x``, hard links, symlinks)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def refuse_input_as_output(output: str, inputs: list[str]) -> str | None:
    """The first of ``inputs`` that ``output`` would overwrite, else ``None``.

    Inputs are never modified: a rename over an input would replace it even though the
    bytes were read first. ``-`` (stdin/stdout) is never a file.
    """
    if output == "-":
        return None
    return next((p for p in inputs if p != "-" and same_file(output, p)), None)


def ensure_not_an_input(output: str, inputs: list[str]) -> None:
    """Raise a :class:`UsageError` when writing ``output`` would replace one of ``inputs``."""
    clash = refuse_input_as_output(output, inputs)
    if clash is not None:
        raise UsageError(
            f"output {output} is also an input ({clash}); inputs are never modified, "
            "choose another -o"
        )


@contextlib.contextmanager
def write_errors(prefix: str) -> Iterator[None]:
    """Turn an :class:`OSError` from writing into one ``profkit: error: <prefix><reason>``.

    :class:`BrokenPipeError` passes through: ``profkit ... | head`` is a success.
    """
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise ProfkitError(f"{prefix}{exc.strerror or exc}") from None


def write_stdout(data: bytes) -> None:
    """Write bytes to stdout now, every write checked (:mod:`profkit._output`), so a
    write error (a full disk behind ``>``) becomes one ``profkit: error:`` line here
    rather than a loss at interpreter exit or inside ``BufferedWriter``."""
    with write_errors("cannot write to stdout: "):
        _output.write_stdout(data)


#: Longest chain of symlinks followed (the kernel's own limit is 40).
_MAX_LINKS = 40


def refuse_planted_symlinks(path: str) -> None:
    """Refuse to write through a symlink that ``fs.protected_symlinks`` would not follow.

    Every link of the chain at ``path`` is checked: in a sticky, world-writable directory
    (``/tmp``) it must belong to us or to the directory's owner. Raises
    :class:`PermissionError` naming the link.
    """
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    for _ in range(_MAX_LINKS):
        try:
            link = os.lstat(path)
        except OSError:
            return  # nothing there (or not reachable): no link to follow
        if not stat.S_ISLNK(link.st_mode) or uid is None:
            return
        directory = os.path.dirname(path) or "."
        try:
            parent = os.stat(directory)
        except OSError:
            return
        shared = parent.st_mode & stat.S_ISVTX and parent.st_mode & stat.S_IWOTH
        if shared and link.st_uid not in (uid, parent.st_uid):
            raise PermissionError(
                errno.EACCES,
                "refusing to follow a symlink another user owns in a shared sticky "
                "directory (as fs.protected_symlinks does)",
                path,
            )
        path = os.path.join(directory, os.readlink(path))

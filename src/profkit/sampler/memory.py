"""Reading another process's memory with ``process_vm_readv`` (Linux), through ctypes.

Why not ``/proc/PID/mem``: it needs a seek plus a read per access (two system calls) and
the same permission; ``process_vm_readv`` is one call and never stops the target. The
target is never paused, so a read may see a structure half-updated: callers treat every
value as untrusted (bounded sizes, checked pointers) and a failed read as "try the next
sample".
"""

from __future__ import annotations

import ctypes
import errno
import os

from profkit.sampler.errors import AttachError, PermissionDenied, ProcessGone, ReadFault
from profkit.settings import read as read_setting


class _IoVec(ctypes.Structure):
    _fields_ = (("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t))


_libc = ctypes.CDLL(None, use_errno=True)
_readv = _libc.process_vm_readv
_readv.argtypes = (
    ctypes.c_int,
    ctypes.POINTER(_IoVec),
    ctypes.c_ulong,
    ctypes.POINTER(_IoVec),
    ctypes.c_ulong,
    ctypes.c_ulong,
)
_readv.restype = ctypes.c_ssize_t

try:  # the same call from C (_walker.c): ~1 us instead of ctypes' ~6
    from profkit.sampler._walker import read as _native_read
except ImportError:  # pragma: no cover - a build without a C compiler
    _native_read = None  # type: ignore[assignment]

#: Largest single read: every size a reader asks for comes from the target, so it is capped.
MAX_READ = 1 << 20


def permission_reason(pid: int) -> str:
    """Why reading ``pid`` was refused, as precisely as /proc lets us tell."""
    reasons = []
    try:
        st = os.stat(f"/proc/{pid}")
        if st.st_uid != os.geteuid() and os.geteuid() != 0:
            reasons.append(f"it belongs to uid {st.st_uid} and profkit runs as uid {os.geteuid()}")
    except OSError:
        pass
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            scope = int(f.read().strip() or 0)
        if scope >= 1:
            reasons.append(
                f"kernel.yama.ptrace_scope is {scope} (only a parent may read its child; "
                "run as root, or 'sysctl kernel.yama.ptrace_scope=0')"
            )
    except (OSError, ValueError):
        pass
    if not reasons:
        reasons.append(
            "the kernel refused process_vm_readv (in a container this needs the "
            "SYS_PTRACE capability: docker run --cap-add SYS_PTRACE)"
        )
    return "; ".join(reasons)


def error_for(pid: int, err: int, address: int, size: int) -> AttachError:
    """The sampler error for a failed ``process_vm_readv`` (``err`` is its errno)."""
    if err == errno.ESRCH:
        return ProcessGone(f"pid {pid}: the process has exited")
    if err in (errno.EPERM, errno.EACCES):
        return PermissionDenied(
            f"pid {pid}: not permitted to read its memory: {permission_reason(pid)}"
        )
    if err == errno.ENOSYS:
        return PermissionDenied(
            f"pid {pid}: process_vm_readv is not available (seccomp or an old kernel)"
        )
    return ReadFault(f"pid {pid}: cannot read {size} bytes at {address:#x}: {os.strerror(err)}")


def native_wanted(built: bool) -> bool:
    """Whether the sampler's C part (``_walker.c``: reads and the frame walk) is used.

    ``PROFKIT_NATIVE`` is the settings row trace mode's C hot path reads too, read through
    the table so that a misspelt value is an error, not silently "auto": ``off`` uses the
    Python twins, ``on`` requires the C part, ``auto`` uses it when built.
    """
    choice = read_setting(os.environ, "native")
    if choice == "on" and not built:
        raise AttachError(
            "PROFKIT_NATIVE=on: the sampler's C part (profkit.sampler._walker) is not built "
            "(reinstall with a C compiler, or PROFKIT_NATIVE=auto)"
        )
    return built and choice != "off"


class Memory:
    """Reads of one process's address space; one ``process_vm_readv`` per call."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.reads = 0  #: system calls made (for the bench)
        self.native = native_wanted(_native_read is not None)
        self._buffers: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self._local = _IoVec()
        self._remote = _IoVec()

    def read(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address``; raises ReadFault, ProcessGone or PermissionDenied."""
        if size <= 0:
            return b""
        if size > MAX_READ or address <= 0 or address >= 1 << 64:
            raise ReadFault(f"pid {self.pid}: refusing to read {size} bytes at {address:#x}")
        if self.native:
            self.reads += 1
            try:
                return _native_read(self.pid, address, size)
            except OSError as exc:
                raise error_for(self.pid, exc.errno or 0, address, size) from None
        buf = self._buffers.get(size)
        if buf is None:
            buf = ctypes.create_string_buffer(size)
            if len(self._buffers) < 64:
                self._buffers[size] = buf
        local, remote = self._local, self._remote
        local.iov_base = ctypes.addressof(buf)
        local.iov_len = size
        remote.iov_base = address
        remote.iov_len = size
        self.reads += 1
        got = _readv(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got == size:
            return buf.raw
        if got >= 0:
            raise ReadFault(f"pid {self.pid}: short read at {address:#x} ({got} of {size} bytes)")
        raise error_for(self.pid, ctypes.get_errno(), address, size)

    def u64(self, address: int) -> int:
        """One little-endian unsigned 64-bit word."""
        return int.from_bytes(self.read(address, 8), "little")

"""The stack reader: every Python thread's frames in another process, read from outside.

Attaching finds ``_PyRuntime`` (ELF symbols of libpython or the python executable, placed
by ``/proc/PID/maps``), reads ``Py_Version`` to learn the release, and picks its
:class:`~profkit.sampler.layout.Layout`. A sample then follows
``_PyRuntime.interpreters.head → threads.head → next ...``, and for each thread its
current ``_PyInterpreterFrame`` chain (``previous``), with ``process_vm_readv``. The target
keeps running, so any chain may be torn mid-read: walks are bounded, every pointer is
checked, and a thread whose walk fails is simply left out of that sample.

Code objects are cached by address (name, file, first line, location table), and whole
stacks by their raw (code, instruction) words. A code object lives as long as a frame runs
it, but its address is reused once it is freed (start-up frees many): each time a stack
not seen before is named, every code address in it is checked against the cached code's
signature (type, name, file and table pointers, first line), and a mismatch drops the
stack cache. A stack seen before is trusted: that is the trade that keeps a sample cheap.
"""

from __future__ import annotations

import os
import struct
from array import array
from dataclasses import dataclass, field

from profkit.calltree.model import Frame
from profkit.sampler import layout as layouts
from profkit.sampler.elf import read_symbols
from profkit.sampler.errors import AttachError, ProcessGone, ReadFault
from profkit.sampler.layout import Layout
from profkit.sampler.linetable import line_for
from profkit.sampler.memory import Memory, error_for
from profkit.sampler.naming import Namer
from profkit.sampler.procinfo import (
    exe_path,
    open_target_file,
    python_candidates,
    read_maps,
    version_from_name,
)

#: Deepest stack walked (deeper frames are cut; the sample keeps its innermost part).
MAX_DEPTH = 4096
#: Most threads walked per interpreter per sample (a torn list could otherwise loop).
MAX_THREADS = 4096
_MAX_STRING = 4096
_MAX_LINETABLE = 1 << 20
_MAX_CHUNK = 1 << 20
_FRAME_OWNED_BY_GENERATOR = 1
_FRAME_OWNED_BY_CSTACK = 3
#: Reads of a thread whose walk was cut by a yield (see ``_walker.c``) before keeping it.
_RETRIES = 2
_u64 = struct.Struct("<Q").unpack_from
_pairs = struct.Struct("=QQ").iter_unpack

try:  # the frame walk in C (_walker.c); without it, _walk_py does the same in Python
    from profkit.sampler import _walker
except ImportError:  # pragma: no cover - a build without a C compiler
    _walker = None  # type: ignore[assignment]
_i32 = struct.Struct("<i").unpack_from


@dataclass(frozen=True, slots=True, eq=False)
class CodeInfo:
    """What the sampler keeps about one code object of the target."""

    name: str  #: ``module.qualname``
    module: str
    filename: str
    first_line: int
    linetable: bytes
    frame: Frame  #: the profile's frame (first line, as in-process profiles have it)
    signature: tuple[int, ...] = ()  #: see StackReader._signature
    lines: dict[int, int] = field(default_factory=dict)  #: code-unit offset → line

    def line(self, offset: int) -> int:
        found = self.lines.get(offset)
        if found is None:
            found = line_for(self.linetable, self.first_line, offset)
            if len(self.lines) < 65536:
                self.lines[offset] = found
        return found


#: A resolved stack: (code, line) pairs, innermost first.
Stack = tuple[tuple[CodeInfo, int], ...]


@dataclass(slots=True)
class ThreadStack:
    """One thread at one instant.

    ``key`` is the raw walk (packed (code address, instruction address) pairs): equal keys
    are equal stacks, so callers aggregate by it and resolve each distinct key once.
    """

    native_id: int
    thread_id: int  #: the pthread id Python's ``threading.get_ident()`` gives
    holds_gil: bool
    key: bytes
    frames: Stack


@dataclass(frozen=True, slots=True)
class Target:
    """Where the interpreter is in the target, found once per attach."""

    pid: int
    path: str  #: the file holding ``_PyRuntime`` (libpython or the executable)
    runtime: int  #: address of ``_PyRuntime``
    code_type: int  #: address of ``PyCode_Type`` (0 when not found)
    layout: Layout


def locate(pid: int) -> Target:
    """Find the interpreter in ``pid``; AttachError saying what was found when there is none."""
    if pid <= 0:
        raise AttachError(f"pid {pid}: not a process id")
    maps = read_maps(pid)
    candidates = python_candidates(pid, maps)
    mem = Memory(pid)
    for path, start in candidates:
        try:
            with open(open_target_file(pid, path), "rb") as f:
                syms = read_symbols(f, path, ("_PyRuntime", "Py_Version", "PyCode_Type"))
        except OSError as exc:
            raise AttachError(f"pid {pid}: cannot read {path}: {exc.strerror}") from None
        runtime = syms.symbols.get("_PyRuntime")
        if runtime is None:
            continue
        bias = start - (syms.base_vaddr & ~0xFFF)
        named = version_from_name(path)
        if "Py_Version" not in syms.symbols:
            raise AttachError(
                f"pid {pid}: found Python {named or '(version unknown)'} ({path}): the sampler "
                "supports CPython 3.11, 3.12 and 3.13"
            )
        hexversion = mem.u64(bias + syms.symbols["Py_Version"]) & 0xFFFFFFFF
        minor = hexversion >> 16
        if minor == 0x030D:
            raw = mem.read(bias + runtime, layouts.DEBUG_OFFSETS_SIZE_313)
            lay = layouts.from_debug_offsets(raw)
        elif minor in (0x030B, 0x030C):
            lay = layouts.from_table(hexversion)
        else:
            v = f"{hexversion >> 24}.{(hexversion >> 16) & 0xFF}.{(hexversion >> 8) & 0xFF}"
            raise AttachError(
                f"pid {pid}: found CPython {v} ({path}): the sampler supports CPython 3.11, "
                "3.12 and 3.13"
            )
        code_type = syms.symbols.get("PyCode_Type", 0)
        return Target(pid, path, bias + runtime, bias + code_type if code_type else 0, lay)
    exe = exe_path(pid) or "(unreadable executable)"
    named = next((n for p, _ in candidates if (n := version_from_name(p)) is not None), None)
    if named is not None:
        raise AttachError(
            f"pid {pid}: found Python {named} ({exe}) but no _PyRuntime symbol in it: "
            "the sampler supports CPython 3.11, 3.12 and 3.13"
        )
    raise AttachError(f"pid {pid}: not a Python process ({exe}: no libpython or _PyRuntime)")


class StackReader:
    """Reads every thread's stack of one attached process."""

    def __init__(self, target: Target, namer: Namer | None = None) -> None:
        self.target = target
        self.pid = target.pid
        self.layout = target.layout
        self.mem = Memory(target.pid)
        self.namer = namer or Namer.for_process(target.pid)
        self._codes: dict[int, CodeInfo] = {}
        self._chunk_sizes: dict[int, int] = {}
        self._stacks: dict[bytes, Stack] = {}
        self.native = _walker is not None and os.environ.get("PROFKIT_NATIVE") != "off"
        lay = self.layout
        self._params = (
            lay.frame_span,
            lay.frame_code,
            lay.frame_previous,
            lay.frame_instr,
            lay.frame_owner,
            lay.chunk_previous,
            lay.chunk_size,
            MAX_DEPTH,
            _MAX_CHUNK,
        )
        no = (1 << 64) - 1  # "no such field" for the C side
        if lay.runtime_gil_locked is not None and lay.runtime_gil_holder is not None:
            gil_where, gil_locked, gil_holder = 1, lay.runtime_gil_locked, lay.runtime_gil_holder
        elif (
            lay.interp_gil is not None and lay.gil_locked is not None and lay.gil_holder is not None
        ):
            gil_where, gil_locked, gil_holder = 2, lay.gil_locked, lay.gil_holder
        else:
            gil_where, gil_locked, gil_holder = 0, 0, 0
        self._thread_params = (
            lay.runtime_interpreters_head,
            lay.interp_next,
            lay.interp_threads_head,
            lay.tstate_span,
            lay.tstate_next,
            lay.tstate_thread_id,
            lay.tstate_native_thread_id,
            lay.tstate_datastack_chunk,
            no if lay.tstate_current_frame is None else lay.tstate_current_frame,
            lay.tstate_cframe if lay.tstate_cframe is not None else 0,
            lay.cframe_current_frame if lay.cframe_current_frame is not None else 0,
            gil_where,
            gil_locked,
            gil_holder,
            lay.interp_gil if lay.interp_gil is not None else 0,
            MAX_THREADS,
            _RETRIES,
        )
        self.torn = 0  #: thread walks abandoned on a failed or inconsistent read
        self.retries = 0  #: walks read again because a yield cut them
        self.reused = 0  #: code addresses found holding another code object than cached

    @classmethod
    def attach(cls, pid: int) -> StackReader:
        """Locate the interpreter in ``pid`` and check the layout against a live thread."""
        reader = cls(locate(pid))
        reader.check()
        return reader

    def check(self) -> None:
        """Fail clearly when the offsets do not describe the target (wrong layout)."""
        lay = self.layout
        interp = self.mem.u64(self.target.runtime + lay.runtime_interpreters_head)
        if interp == 0:
            raise AttachError(f"pid {self.pid}: the interpreter is not initialized (yet)")
        head = self.mem.u64(interp + lay.interp_threads_head)
        if head == 0:
            return
        back = self.mem.u64(head + lay.tstate_interp)
        if back != interp:
            raise AttachError(
                f"pid {self.pid}: CPython {lay.version}: thread state does not point back to "
                "its interpreter; the offsets do not match this build"
            )

    def interpreters(self) -> list[int]:
        out: list[int] = []
        interp = self.mem.u64(self.target.runtime + self.layout.runtime_interpreters_head)
        while interp and len(out) < 64:
            out.append(interp)
            interp = self.mem.u64(interp + self.layout.interp_next)
        return out

    def gil_holder(self, interp: int) -> int:
        """Address of the thread state holding the GIL (0 when it is free)."""
        lay = self.layout
        mem = self.mem
        if lay.runtime_gil_locked is not None and lay.runtime_gil_holder is not None:
            base = self.target.runtime
            locked_at, holder_at = base + lay.runtime_gil_locked, base + lay.runtime_gil_holder
        elif (
            lay.interp_gil is not None and lay.gil_locked is not None and lay.gil_holder is not None
        ):
            gil = mem.u64(interp + lay.interp_gil)
            if gil == 0:
                return 0
            locked_at, holder_at = gil + lay.gil_locked, gil + lay.gil_holder
        else:
            return 0
        if not _i32(mem.read(locked_at, 4))[0]:
            return 0
        return mem.u64(holder_at)

    def sample(self, want_gil: bool = False) -> list[ThreadStack]:
        """Every thread's stack now (threads whose walk tore are left out).

        Raises ProcessGone once the target has exited.
        """
        if self.native:
            return self._sample_c(want_gil)
        lay = self.layout
        mem = self.mem
        out: list[ThreadStack] = []
        try:
            interps = self.interpreters()
        except ReadFault:
            self.torn += 1
            return out
        span = lay.tstate_span
        for interp in interps:
            try:
                holder = self.gil_holder(interp) if want_gil else 0
                tstate = mem.u64(interp + lay.interp_threads_head)
            except ReadFault:
                self.torn += 1
                continue
            seen = 0
            while tstate and seen < MAX_THREADS:
                seen += 1
                try:
                    raw = mem.read(tstate, span)
                except ReadFault:
                    self.torn += 1
                    break
                native = _u64(raw, lay.tstate_native_thread_id)[0]
                ident = _u64(raw, lay.tstate_thread_id)[0]
                try:
                    for attempt in range(_RETRIES + 1):
                        if attempt:
                            raw = mem.read(tstate, span)
                        key, cut = self._walk_raw(
                            self._current_frame(raw), _u64(raw, lay.tstate_datastack_chunk)[0]
                        )
                        if not cut:
                            break
                        self.retries += 1
                    frames = self._stacks.get(key)
                    if frames is None:
                        frames = self.resolve(key)
                except ReadFault:
                    self.torn += 1
                    frames = None
                if frames is not None and native:
                    out.append(ThreadStack(native, ident, tstate == holder, key, frames))
                tstate = _u64(raw, lay.tstate_next)[0]
        return out

    def _sample_c(self, want_gil: bool) -> list[ThreadStack]:
        """:meth:`sample` in one call into ``_walker.c`` (thread list, frames, retries)."""
        try:
            threads, torn, retries = _walker.sample(
                self.pid, self.target.runtime, want_gil, self._thread_params, self._params
            )
        except OSError as exc:
            error = error_for(self.pid, exc.errno or 0, self.target.runtime, 0)
            if isinstance(error, ReadFault):
                self.torn += 1
                return []
            raise error from None
        self.torn += torn
        self.retries += retries
        out = []
        stacks = self._stacks
        for native, ident, holds, key in threads:
            if not native:
                continue  # a thread state whose OS thread has not started yet (3.12+)
            frames = stacks.get(key)
            if frames is None:
                try:
                    frames = self.resolve(key)
                except ReadFault:
                    self.torn += 1
                    continue
            out.append(ThreadStack(native, ident, holds, key, frames))
        return out

    def _current_frame(self, raw: bytes) -> int:
        """The thread's innermost frame, from its thread state's bytes."""
        lay = self.layout
        if lay.tstate_current_frame is not None:
            return int(_u64(raw, lay.tstate_current_frame)[0])
        assert lay.tstate_cframe is not None and lay.cframe_current_frame is not None
        cframe = _u64(raw, lay.tstate_cframe)[0]
        return self.mem.u64(cframe + lay.cframe_current_frame) if cframe else 0

    def _walk_raw(self, frame: int, chunk: int) -> tuple[bytes, int]:
        """The walk from ``frame`` outwards as packed (code, instr) pairs (C when built),
        and whether it ended at a generator's frame (cut by a yield while we read)."""
        if not frame:
            return b"", 0
        if self.native:
            try:
                return _walker.walk(self.pid, frame, chunk, self._params)
            except OSError as exc:
                raise error_for(self.pid, exc.errno or 0, frame, 0) from None
        return self._walk_py(frame, chunk)

    def resolve(self, key: bytes) -> Stack:
        """Name every frame of a raw walk (codes cached by address; the result by key)."""
        codes = self._codes
        adaptive = self.layout.code_adaptive
        out = []
        checked: set[int] = set()
        for code, instr in _pairs(key):
            info = codes.get(code)
            # A new stack: make sure each code address still holds the code we named
            # (start-up frees many code objects, and their addresses are reused).
            if info is not None and code not in checked and self._signature(code) != info.signature:
                self._stacks.clear()
                self.reused += 1
                info = None
            if info is None:
                info = self._code(code)
            checked.add(code)
            offset = (instr - code - adaptive) >> 1
            out.append((info, info.line(offset if offset >= 0 else 0)))
        stack = tuple(out)
        if len(self._stacks) > 100_000:
            self._stacks.clear()
        self._stacks[key] = stack
        return stack

    def _walk_py(self, frame: int, chunk: int) -> tuple[bytes, int]:
        """The frames from ``frame`` outwards, innermost first (the C walker's fallback).

        Why chunks: a thread's frames live in its data-stack chunks (16 KiB each, newest
        first), so the newest chunk is read whole in one call and frames inside it cost
        no system call; older chunks are read when the walk reaches them. Frames outside
        every chunk (generators' and coroutines' own frames) are read one by one.
        """
        lay = self.layout
        read = self.mem.read
        span = lay.frame_span
        off_code, off_prev, off_instr, off_owner = (
            lay.frame_code,
            lay.frame_previous,
            lay.frame_instr,
            lay.frame_owner,
        )
        regions: list[tuple[int, int, bytes]] = []
        pending = chunk
        if pending:
            pending = self._load_chunk(pending, regions)
        out: list[int] = []
        depth = 0
        owner = 0
        while frame and depth < MAX_DEPTH:
            depth += 1
            for start, end, region in regions:
                if start <= frame and frame + span <= end:
                    data, at = region, frame - start
                    break
            else:
                while pending and self._chunk_holds(pending, frame, span):
                    pending = self._load_chunk(pending, regions)
                start, end, data = regions[-1] if regions else (0, 0, b"")
                if start <= frame and frame + span <= end:
                    at = frame - start
                else:
                    data = read(frame, span)
                    at = 0
            code = _u64(data, at + off_code)[0]
            owner = data[at + off_owner]
            if owner != _FRAME_OWNED_BY_CSTACK and code:
                out.append(code)
                out.append(_u64(data, at + off_instr)[0])
            frame = _u64(data, at + off_prev)[0]
        return array("Q", out).tobytes(), int(not frame and owner == _FRAME_OWNED_BY_GENERATOR)

    def _chunk_holds(self, chunk: int, frame: int, span: int) -> bool:
        size = self._chunk_sizes.get(chunk)
        if size is None:
            size = _u64(self.mem.read(chunk + self.layout.chunk_size, 8), 0)[0]
            self._chunk_sizes[chunk] = size
        return chunk <= frame and frame + span <= chunk + size

    def _load_chunk(self, chunk: int, regions: list[tuple[int, int, bytes]]) -> int:
        """Read one data-stack chunk into ``regions``; return the address of the one before."""
        lay = self.layout
        size = self._chunk_sizes.get(chunk)
        if size is None:
            size = _u64(self.mem.read(chunk + lay.chunk_size, 8), 0)[0]
        if not 0 < size <= _MAX_CHUNK:
            return 0
        data = self.mem.read(chunk, size)
        actual = _u64(data, lay.chunk_size)[0]
        if actual != size:  # freed and reused at another size since we cached it
            self._chunk_sizes.pop(chunk, None)
            if not 0 < actual <= _MAX_CHUNK:
                return 0
            size = actual
            data = self.mem.read(chunk, size)
        if len(self._chunk_sizes) > 4096:
            self._chunk_sizes.clear()
        self._chunk_sizes[chunk] = size
        regions.append((chunk, chunk + size, data))
        return _u64(data, lay.chunk_previous)[0]

    def _signature(self, address: int, raw: bytes | None = None) -> tuple[int, ...]:
        """What identifies the code object at ``address``: its type, name, file and table
        pointers and first line (a new code object at a reused address differs in them)."""
        lay = self.layout
        if raw is None:
            raw = self.mem.read(address, lay.code_span)
        return (
            _u64(raw, lay.object_type)[0],
            _u64(raw, lay.code_filename)[0],
            _u64(raw, lay.code_qualname)[0],
            _u64(raw, lay.code_linetable)[0],
            _i32(raw, lay.code_firstlineno)[0],
        )

    def _code(self, address: int) -> CodeInfo:
        lay = self.layout
        raw = self.mem.read(address, lay.code_span)
        if self.target.code_type and _u64(raw, lay.object_type)[0] != self.target.code_type:
            raise ReadFault(f"pid {self.pid}: {address:#x} is not a code object")
        filename = self.string(_u64(raw, lay.code_filename)[0])
        qualname = self.string(_u64(raw, lay.code_qualname)[0])
        first = _i32(raw, lay.code_firstlineno)[0]
        table_at = _u64(raw, lay.code_linetable)[0]
        size = _u64(self.mem.read(table_at + lay.bytes_size, 8), 0)[0] if table_at else 0
        table = (
            self.mem.read(table_at + lay.bytes_data, size) if 0 < size <= _MAX_LINETABLE else b""
        )
        module = self.namer.module(filename)
        name = f"{module}.{qualname}" if module else qualname
        info = CodeInfo(
            name,
            module,
            filename,
            first,
            table,
            Frame(name, filename, first),
            self._signature(0, raw),
        )
        if len(self._codes) > 200_000:
            self._codes.clear()
        self._codes[address] = info
        return info

    def string(self, address: int) -> str:
        """A ``str`` object of the target (compact strings only, as code names are)."""
        if not address:
            return ""
        lay = self.layout
        raw = self.mem.read(address, lay.unicode_compact_size)
        length = _u64(raw, lay.unicode_length)[0]
        state = int.from_bytes(raw[lay.unicode_state : lay.unicode_state + 4], "little")
        kind = (state >> lay.unicode_kind_bit) & 7
        if not (state >> lay.unicode_compact_bit) & 1 or kind not in (1, 2, 4):
            return "<?>"
        length = min(length, _MAX_STRING)
        if (state >> lay.unicode_ascii_bit) & 1:
            data = self.mem.read(address + lay.unicode_ascii_size, length)
            return data.decode("ascii", "replace")
        data = self.mem.read(address + lay.unicode_compact_size, length * kind)
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return data.decode(codec, "replace")


def alive_or_gone(pid: int) -> None:
    """Raise ProcessGone when ``pid`` no longer exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise ProcessGone(f"pid {pid}: the process has exited") from None
    except PermissionError:
        pass

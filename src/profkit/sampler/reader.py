"""The stack reader: every Python thread's frames in another process, read from outside.

:func:`~profkit.sampler.locate.locate` finds ``_PyRuntime`` and the release's
:class:`~profkit.sampler.layout.Layout` once. A sample then follows
``_PyRuntime.interpreters.head → threads.head → next ...``, and for each thread its
current ``_PyInterpreterFrame`` chain (``previous``), with ``process_vm_readv``: in one
call into ``_walker.c`` when it is built, else in Python (:mod:`~profkit.sampler.pywalk`).
The target keeps running, so any chain may be torn mid-read: walks are bounded, every
pointer is checked, and a thread whose walk fails is simply left out of that sample. A
chain a generator's yield cut is kept, with its callers read again (see ``_walker.c``):
re-reading the whole thread instead biased samples away from generators (issue #12).
Naming raw walks is :mod:`~profkit.sampler.codes`' job.
"""

from __future__ import annotations

import os
import struct

from profkit._record import record
from profkit.sampler.codes import CodeInfo, CodeNamer, Stack
from profkit.sampler.errors import AttachError, ProcessGone, ReadFault
from profkit.sampler.layout import describe_series
from profkit.sampler.locate import Target, locate
from profkit.sampler.memory import Memory, error_for, native_wanted
from profkit.sampler.naming import Namer
from profkit.sampler.procinfo import thread_ids
from profkit.sampler.pywalk import CUT_NONE, LoopCheck, PyWalker, Walk, callers_at
from profkit.sampler.threadnames import ThreadNames
from profkit.sampler.verify import check_layout

__all__ = ["CodeInfo", "Stack", "StackReader", "Target", "ThreadStack", "alive_or_gone", "locate"]

#: Deepest stack walked (deeper frames are cut; the sample keeps its innermost part).
MAX_DEPTH = 4096
#: Most threads walked per interpreter per sample (a torn list could otherwise loop).
MAX_THREADS = 4096
_MAX_CHUNK = 1 << 20
#: Most interpreters walked per sample.
MAX_INTERPRETERS = 64
#: ``StackReader.lists_cut`` flags (as _walker.c's sample() returns them): which lists the
#: last sample stopped early, at the count cap (DEPTH) or where they looped (CYCLE).
CUT_THREADS_DEPTH, CUT_THREADS_CYCLE, CUT_INTERPS_DEPTH, CUT_INTERPS_CYCLE = 1, 2, 4, 8
#: Reads of a thread looking for the callers of a generator a yield cut off (see _walker.c).
_RETRIES = 2
_u64 = struct.Struct("<Q").unpack_from
_i32 = struct.Struct("<i").unpack_from

try:  # the frame walk in C (_walker.c); without it, pywalk does the same in Python
    from profkit.sampler import _walker
except ImportError:  # pragma: no cover - a build without a C compiler
    _walker = None  # type: ignore[assignment]


@record
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
    name: str = (
        ""  #: threading's name, where a caller looked it up (:meth:`StackReader.thread_name`)
    )
    cut: int = CUT_NONE  #: why the walk stopped before the outermost frame (pywalk.CUT_*)


class StackReader:
    """Reads every thread's stack of one attached process."""

    def __init__(self, target: Target, namer: Namer | None = None) -> None:
        self.target = target
        self.pid = target.pid
        self.layout = target.layout
        self.mem = Memory(target.pid)
        self.namer = namer or Namer.for_process(target.pid)
        self.codes = CodeNamer(self.mem, self.layout, target.code_type, self.namer)
        self.pywalk = PyWalker(self.mem, self.layout, MAX_DEPTH, _MAX_CHUNK)
        self.native = native_wanted(_walker is not None)
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
            lay.tstate_datastack_top,
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
        self._names: ThreadNames | None = None
        self.torn = 0  #: thread walks abandoned on a failed or inconsistent read
        self.retries = 0  #: second reads for the callers of a generator a yield cut off
        self.lists_cut = 0  #: the last sample's CUT_THREADS_* / CUT_INTERPS_* flags

    @classmethod
    def attach(cls, pid: int) -> StackReader:
        """Locate the interpreter in ``pid`` and check the layout against a live thread."""
        reader = cls(locate(pid))
        reader.check()
        return reader

    def check(self) -> None:
        """Fail clearly when the offsets do not describe the target (wrong layout); an
        assumed layout outside its known range is checked in full (:mod:`.verify`)."""
        lay = self.layout
        interp = self.mem.u64(self.target.runtime + lay.runtime_interpreters_head)
        if interp == 0:
            raise AttachError(f"pid {self.pid}: the interpreter is not initialized (yet)")
        if lay.verify:
            problem = check_layout(
                self.mem,
                lay,
                self.target.runtime,
                self.target.code_type,
                lambda: set(thread_ids(self.pid)),
            )
            if problem is not None:
                raise AttachError(
                    f"pid {self.pid}: found CPython {lay.version}: the {lay.assumed_from} "
                    f"layout assumed for it does not match this build ({problem}); "
                    + describe_series(lay)
                )
            return
        head = self.mem.u64(interp + lay.interp_threads_head)
        if head == 0:
            return
        back = self.mem.u64(head + lay.tstate_interp)
        if back != interp:
            raise AttachError(
                f"pid {self.pid}: CPython {lay.version}: thread state does not point back to "
                "its interpreter; the offsets do not match this build"
            )

    def thread_name(self, ident: int) -> str | None:
        """``threading``'s name of the thread whose ident is ``ident`` (None when it is not
        found: no ``threading``, a thread not yet in ``threading._active``, a torn read).
        A few hundred reads the first time (``sys.modules`` is searched), a few dozen after.
        A name is a label, never a reason to fail: a process gone by the time its first
        stack is named (a short-lived pool worker) gives None, not ProcessGone, which
        escaped the sampler's loop and ended ``run --mode sample`` with status 2."""
        try:
            if self._names is None:
                interps = self.interpreters()
                minor = int(self.layout.version.split(".")[1])
                self._names = ThreadNames(
                    self.mem, self.layout, interps[0] if interps else 0, minor
                )
            return self._names.name(ident)
        except (AttachError, ValueError):  # ReadFault, ProcessGone, PermissionDenied
            return None

    def interpreters(self) -> list[int]:
        """The interpreter list, bounded by a count and a cycle check (``lists_cut``)."""
        out: list[int] = []
        interp = self.mem.u64(self.target.runtime + self.layout.runtime_interpreters_head)
        loop = LoopCheck(interp)
        while interp:
            if len(out) == MAX_INTERPRETERS:
                self.lists_cut |= CUT_INTERPS_DEPTH
                break
            out.append(interp)
            interp = self.mem.u64(interp + self.layout.interp_next)
            if interp and loop.seen(interp):
                self.lists_cut |= CUT_INTERPS_CYCLE
                break
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

    @property
    def reused(self) -> int:
        """Code addresses found holding another code object than cached."""
        return self.codes.reused

    def resolve(self, key: bytes) -> Stack:
        """Name every frame of a raw walk (see :class:`~profkit.sampler.codes.CodeNamer`)."""
        return self.codes.resolve(key)

    def sample(self, want_gil: bool = False) -> list[ThreadStack]:
        """Every thread's stack now (threads whose walk tore are left out).

        Raises ProcessGone once the target has exited.
        """
        self.lists_cut = 0
        if self.native:
            return self._sample_c(want_gil)
        out: list[ThreadStack] = []
        try:
            interps = self.interpreters()
        except ReadFault:
            self.torn += 1
            return out
        for interp in interps:
            try:
                holder = self.gil_holder(interp) if want_gil else 0
                tstate = self.mem.u64(interp + self.layout.interp_threads_head)
            except ReadFault:
                self.torn += 1
                continue
            self._sample_threads(tstate, holder, out)
        return out

    def _sample_threads(self, tstate: int, holder: int, out: list[ThreadStack]) -> None:
        """One interpreter's threads from ``tstate`` (its list's head) into ``out``: the
        list bounded by MAX_THREADS and a cycle check, as in _walker.c."""
        lay = self.layout
        seen = 0
        loop = LoopCheck(tstate)
        while tstate:
            if seen == MAX_THREADS:
                self.lists_cut |= CUT_THREADS_DEPTH
                break
            seen += 1
            try:
                raw = self.mem.read(tstate, lay.tstate_span)
            except ReadFault:
                self.torn += 1
                break
            native = _u64(raw, lay.tstate_native_thread_id)[0]
            ident = _u64(raw, lay.tstate_thread_id)[0]
            try:
                walk = self._walk_thread(tstate, raw)
                key = walk.key()
                frames = self.codes.cached(key) or self.codes.resolve(key)
            except ReadFault:
                self.torn += 1
                frames = None
            if frames is not None and native:
                held = tstate == holder
                out.append(ThreadStack(native, ident, held, key, frames, cut=walk.cut))
            tstate = _u64(raw, lay.tstate_next)[0]
            if tstate and loop.seen(tstate):
                self.lists_cut |= CUT_THREADS_CYCLE
                break

    def _walk_thread(self, tstate: int, raw: bytes) -> Walk:
        """The raw walk of one thread (its state's bytes ``raw``), a yield-cut chain's
        callers spliced on as ``splice_callers`` in _walker.c does it."""
        lay = self.layout
        walk = self._walk(raw)
        if not walk.cut_frame:
            return walk
        chunk1 = _u64(raw, lay.tstate_datastack_chunk)[0]
        top1 = _u64(raw, lay.tstate_datastack_top)[0]
        for _ in range(_RETRIES):
            self.retries += 1
            again = self._walk(self.mem.read(tstate, lay.tstate_span))
            start = callers_at(again, walk.cut_frame, chunk1, top1)
            if start < len(again.addrs):
                room = max(0, MAX_DEPTH - len(walk.addrs))
                walk.words += again.words[2 * start : 2 * (start + room)]
                break
        return walk

    def _walk(self, raw: bytes) -> Walk:
        lay = self.layout
        frame = self._current_frame(raw)
        if not frame:
            return Walk()
        return self.pywalk.walk(frame, _u64(raw, lay.tstate_datastack_chunk)[0])

    def _sample_c(self, want_gil: bool) -> list[ThreadStack]:
        """:meth:`sample` in one call into ``_walker.c`` (thread list, frames, retries)."""
        try:
            threads, torn, retries, self.lists_cut = _walker.sample(
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
        cached = self.codes.cached
        for native, ident, holds, key, cut in threads:
            if not native:
                continue  # a thread state whose OS thread has not started yet (3.12+)
            frames = cached(key)
            if frames is None:
                try:
                    frames = self.codes.resolve(key)
                except ReadFault:
                    self.torn += 1
                    continue
            out.append(ThreadStack(native, ident, holds, key, frames, cut=cut))
        return out

    def _current_frame(self, raw: bytes) -> int:
        """The thread's innermost frame, from its thread state's bytes."""
        lay = self.layout
        if lay.tstate_current_frame is not None:
            return int(_u64(raw, lay.tstate_current_frame)[0])
        assert lay.tstate_cframe is not None and lay.cframe_current_frame is not None
        cframe = _u64(raw, lay.tstate_cframe)[0]
        return self.mem.u64(cframe + lay.cframe_current_frame) if cframe else 0


def alive_or_gone(pid: int) -> None:
    """Raise ProcessGone when ``pid`` no longer exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise ProcessGone(f"pid {pid}: the process has exited") from None
    except PermissionError:
        pass

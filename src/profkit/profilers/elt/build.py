"""The profile at the end of a run: per-thread trees, timeline and metadata.

Three sources, one shape: sample mode's trees, the C recorder's flat export (nodes made
only when read, :mod:`~profkit.profilers.elt.flat`), or the pure Python stacks. Each
thread keeps Python's id, its name and its OS thread id (``native_id``), so exports
name threads as ``top -H``, ``perf`` and debuggers do.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterable

from profkit.api import FunctionInfo, ProfilerInfo
from profkit.api.ids import FunctionId
from profkit.calltree.model import CallNode, CallProfile, Frame, Span, ThreadTree
from profkit.profilers.elt import calibrate, flat, native
from profkit.profilers.elt.compensate import compensate_rows
from profkit.profilers.elt.config import EltSettings
from profkit.profilers.elt.threads import ThreadMark
from profkit.profilers.elt.trace import PythonRecorder, Stack
from profkit.profilers.elt.tree import convert

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

    from profkit.profilers.elt.sampling import SampledTrees
    from profkit.profilers.elt.sinks import LineFlusher, UdpSender


class Results:
    """Mixin with :meth:`build_profile`; :class:`EltProfiler` provides the state."""

    settings: EltSettings
    _clock: Callable[[], int]
    _info: ProfilerInfo | None
    _recorder: Any
    _lock: threading.Lock
    _stacks: list[tuple[ThreadMark, Stack]]
    _sampled: SampledTrees | None
    _python: PythonRecorder | None
    _spans: list[tuple[int, int, int, int, int]] | None
    _spans_dropped: int
    _started_ns: int
    _started_wall_ns: int
    _closed_open_calls: int
    _flusher: LineFlusher | None
    _udp: UdpSender | None
    _calibration: calibrate.Calibration | None
    _emit: Callable[[str], None] | None
    #: the profiler's (:class:`~profkit.profilers.base.SettingsProfiler`)
    _function_info: Callable[[FunctionId], FunctionInfo]

    def _display_name(self, info: FunctionInfo) -> str:
        raise NotImplementedError

    def _compensate(self) -> bool:
        raise NotImplementedError

    # -- results ----------------------------------------------------------------------
    def build_profile(self) -> CallProfile:
        """The profile so far: open calls are closed now, hidden-only branches dropped."""
        now = self._clock()
        profile = CallProfile(mode="sample" if self.settings.mode == "sample" else "trace")
        frames: dict[int, Frame] = {}
        # C functions the C recorder named itself (ccalls.c); others are the collector's.
        c_names: dict[int, str] = self._recorder.c_names if self._recorder is not None else {}

        def frame_of(fid: int) -> Frame:
            frame = frames.get(fid)
            if frame is None:
                c_name = c_names.get(fid)
                if c_name is not None:
                    frame = frames[fid] = Frame(c_name)
                else:
                    info = self._function_info(FunctionId(fid))
                    frame = frames[fid] = Frame(
                        self._display_name(info), info.filename, info.first_line
                    )
            return frame

        profile.metadata["compensation"] = _compensation(None, self, None)
        if self.settings.mode == "sample":
            trees = self._sampled.trees if self._sampled is not None else {}
            for tid, (name, native_id, root) in sorted(trees.items()):
                tree = convert(root, profile, frame_of, root_totals=True)
                profile.threads.append(ThreadTree(int(tid), name, tree, native_id))
        elif self._recorder is not None:
            self._build_native(profile, now, frame_of)
        else:
            self._build_python(profile, now, frame_of)
        profile.metadata.update(self._metadata(now))
        return profile

    def build_stopped(self) -> CallProfile:
        """:meth:`build_profile` once the C recorder has stopped, with the garbage collector
        off (as the program left it afterwards): naming ~5,000 functions and making their
        frames set off dozens of collections, each over the program's whole heap (sympy:
        33, ~64 M instructions, issue #26). Deferred, not skipped. Only then: before, this
        code's calls would be recorded."""
        if self._recorder is None:
            return self.build_profile()
        import gc  # builtin, imported here: not a module of every start-up

        enabled = gc.isenabled()
        gc.disable()
        try:
            return self.build_profile()
        finally:
            if enabled:
                gc.enable()

    def _build_python(
        self, profile: CallProfile, now: int, frame_of: Callable[[int], Frame]
    ) -> None:
        """The threads (and timeline) of the pure Python path's stacks."""
        flusher_ident = self._flusher_ident()
        recorder = self._python
        with self._lock:
            stacks = list(self._stacks)
        thread_index: dict[int, int] = {}
        for mark, stack in stacks:
            if mark.ident == flusher_ident:
                continue
            if recorder is not None:
                self._closed_open_calls += recorder.close_open(stack, now)
            tree = convert(stack[0], profile, frame_of, root_totals=False)
            if tree.children:
                thread_index[id(stack)] = len(profile.threads)
                profile.threads.append(_thread_tree(mark, tree, self._info))
        if recorder is not None:
            self._spans_dropped = recorder.spans_dropped
        if self._spans:
            self._add_spans(profile, thread_index, frame_of)

    def _build_native(
        self, profile: CallProfile, now: int, frame_of: Callable[[int], Frame]
    ) -> None:
        """The threads (and timeline) the C recorder holds, as the Python path builds them."""
        assert self._recorder is not None
        thread_index: dict[int, int] = {}
        cal = self._calibration
        c_names: dict[int, str] = self._recorder.c_names
        assert self._info is not None
        frames_of = _frames_of(
            profile, c_names, self._info.get_function_info, self._display_name, cal
        )
        c_frames, cal_frames = frames_of.c_frames, frames_of.cal_frames
        # The C export: rows in the file's layout, nodes made only when read (flat.py).
        closed, flat_threads = self._recorder.export_flat(now, frames_of)
        self._closed_open_calls += closed
        profile._frame_index = {}  # rebuilt from profile.frames when next asked
        costs = None
        # Under a base time the calibration's calls are cut unless they ran slow: what is
        # left is the slow tail, and a busy machine once made it 4 ms "per call" (every
        # time in the profile would have been taken to zero). Nothing is compensated then.
        hidden = self.settings.basetime_ns > 0
        for token, data in flat_threads:
            if cal is not None and token is cal.token and not hidden:
                costs = cal.costs(
                    flat.interleaved(data, _CALIBRATION_COLUMNS),
                    len(_CALIBRATION_COLUMNS),
                    lambda i: cal_frames.get(i) or profile.frames[i].name,
                )
        if cal is not None and not hidden:
            if costs is not None:
                cal.remember(costs)  # for later runs (calcache.py)
            elif cal.cached is not None:
                costs = cal.cached
        kept = [(t, d) for t, d in flat_threads if cal is None or t is not cal.token]
        if costs is not None:
            for _, data in kept:
                compensate_rows(data, costs, c_frames)  # in place: no copy of the rows
        if len(kept) < len(flat_threads):
            # The calibration's thread is profkit's, not the program's: it is left out, and
            # so are the frames only it used (threading's, the C functions it called).
            kept = _only_used_frames(profile, kept)
        for token, data in kept:
            thread_index[id(token)] = len(profile.threads)
            profile.threads.append(_thread_tree(token, flat.tree(data), self._info))
        profile.metadata["compensation"] = _compensation(costs, self, cal)
        if self._spans is not None:
            spans, self._spans_dropped = self._recorder.spans()
            # Keyed by the thread's token (alive in ``exported``), as the Python path keys
            # them by its stack.
            self._spans = [(id(token), *rest) for token, *rest in spans]
            self._add_spans(profile, thread_index, frame_of)

    def _add_spans(
        self,
        profile: CallProfile,
        thread_index: dict[int, int],
        frame_of: Callable[[int], Frame],
    ) -> None:
        """The timeline, in start order, times relative to the start of profiling."""
        base = self._started_ns
        spans = self._spans or []
        for key, fid, start, end, depth in sorted(spans, key=lambda s: (s[0], s[2], s[4])):
            index = thread_index.get(key)
            if index is None:
                continue  # a thread left out of the profile (silent, or nothing shown)
            frame = profile.frame_id(frame_of(fid))
            profile.spans.append(Span(index, frame, max(start - base, 0), end - base, depth))

    def _flusher_ident(self) -> int | None:
        thread = self._flusher.thread if self._flusher is not None else None
        return thread.ident if thread is not None else None

    def _metadata(self, now: int) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "profiler": f"{type(self).__module__}:{type(self).__qualname__}",
            "pid": os.getpid(),
            "argv": list(sys.argv),
            "python": sys.version.split()[0],
            "start_time_ns": self._started_wall_ns,
            "duration_ns": now - self._started_ns,
            "settings": self.settings.as_dict(),
            "open_calls_closed_at_end": self._closed_open_calls,
        }
        if self.settings.mode != "sample":
            # Which implementation recorded it (PROFKIT_NATIVE=auto picks one silently).
            meta["trace_engine"] = "c" if self._recorder is not None else "python"
        if getattr(self, "c_calls_given_up", False):
            meta["c_calls_stopped"] = (
                "the program claimed a sys.monitoring tool id when none was free: C "
                "functions are nodes only until then"
            )
        if self._info is not None:
            with contextlib.suppress(Exception):
                meta["backend"] = self._info.backend_name
        if self._flusher is not None:
            # Counted once: the flusher's queue drops, plus what the socket refused.
            meta["lines_dropped"] = self._flusher.dropped + (
                self._udp.socket_dropped if self._udp else 0
            )
        if self._udp is not None:
            meta["udp_datagrams_sent"] = self._udp.sent_datagrams
        if self._spans is not None:
            meta["timeline_spans_dropped"] = self._spans_dropped
        return meta


def _only_used_frames(
    profile: CallProfile, threads: list[tuple[Any, bytearray]]
) -> list[tuple[Any, bytearray]]:
    """``threads``' rows with the frames none of them uses dropped from ``profile`` (the
    others keep their order, renumbered in place: a copy of the rows would be the run's
    peak memory). Frames are interned for every exported thread, before a thread can be
    left out."""
    used: set[int] = set()
    for _, data in threads:
        used.update(_frames_used(data))
    if all(i in used for i in range(len(profile.frames))):
        return threads
    renumber: dict[int, int] = {-1: -1}
    frames: list[Frame] = []
    # old index -> new, as int32s for the C pass (csrc/rowsums.c); -1: unused
    table = memoryview(bytearray(b"\xff" * (4 * len(profile.frames)))).cast("i")
    for i, frame in enumerate(profile.frames):
        if i in used:
            table[i] = renumber[i] = len(frames)
            frames.append(frame)
    profile.frames = frames
    profile._frame_index = {}  # rebuilt from the frames on the next frame_id
    for _, data in threads:
        indices = flat.column(data, "frame")
        if native.renumber_frames is not None:
            native.renumber_frames(indices, table)  # a Python loop: ~1,000 instr. a row
        else:
            for at in range(len(indices)):
                indices[at] = renumber[indices[at]]
        indices.release()
    table.release()
    return threads


def _frames_used(data: bytearray) -> Iterable[int]:
    """The frames of one thread's rows: those of rows 1.. as the keys of the C
    ``frame_sums`` (one pass, no int object a row), else the whole frame column."""
    if native.frame_sums is not None:
        with contextlib.suppress(ValueError, OverflowError):
            return native.frame_sums(flat.column(data, "frame"), flat.column(data, "incl"))
    return flat.column(data, "frame")


class _FramesOf:
    """export_flat's ``frame_of`` (csrc/frames.c): each function's index in
    ``profile.frames``, added if new as ``profile.frame_id`` would add it, by a tuple key
    (a Frame's hash is Python code, ``_record``). The export asks :meth:`many` for every
    function at once: sympy names ~5,000, and a call from C apiece cost more than the
    naming (issue #26)."""

    __slots__ = ("c_frames", "cal_frames", "many")

    def __init__(
        self,
        many: Callable[[list[int]], list[int]],
        c_frames: set[int],
        cal_frames: dict[int, str],
    ) -> None:
        self.many = many
        #: frame indices of C functions (compensated by their own costs)
        self.c_frames = c_frames
        #: the calibration's functions: indices past every real frame, never interned
        self.cal_frames = cal_frames

    def __call__(self, fid: int) -> int:
        return self.many([fid])[0]


def _frames_of(
    profile: CallProfile,
    c_names: dict[int, str],
    info_of: Callable[[FunctionId], FunctionInfo],
    display_name: Callable[[FunctionInfo], str],
    cal: calibrate.Calibration | None,
) -> _FramesOf:
    """The namer of :meth:`Results._build_native`'s export (see :class:`_FramesOf`)."""
    frames = profile.frames
    known = {(f.name, f.file, f.line): i for i, f in enumerate(frames)}
    c_frames: set[int] = set()
    cal_frames: dict[int, str] = {}

    def many(fids: list[int]) -> list[int]:
        indices: list[int] = []
        for fid in fids:
            c_name = c_names.get(fid)
            if c_name is not None:
                key = (c_name, "", 0)
                native_frame = True
            else:
                info = info_of(fid)  # type: ignore[arg-type]
                if cal is not None and info.filename == calibrate.FILE:
                    indices.append(_CALIBRATION_FRAMES + len(cal_frames))
                    cal_frames[indices[-1]] = info.name
                    continue
                key = (display_name(info), info.filename, info.first_line)
                native_frame = info.is_native  # 3.11: C calls from the collector
            index = known.get(key)
            if index is None:
                index = known[key] = len(frames)
                frames.append(Frame(*key))
            if native_frame:
                c_frames.add(index)
            indices.append(index)
        return indices

    return _FramesOf(many, c_frames, cal_frames)


#: First frame index given to the calibration's functions (never a real frame's; below
#: 2**31, as the rows' frame column is int32).
_CALIBRATION_FRAMES = 1 << 30
#: The calibration thread's columns, as ``Calibration.costs`` reads its rows.
_CALIBRATION_COLUMNS = ("parent", "frame", "calls", "incl")


def _compensation(
    costs: calibrate.Costs | None, profiler: Results, cal: calibrate.Calibration | None
) -> dict[str, Any]:
    """The metadata that says whether (and by how much) recorded times were compensated
    for the profiler's own cost per call (:mod:`~profkit.profilers.elt.compensate`)."""
    if costs is not None:
        assert cal is not None
        return {
            "applied": True,
            "cost_per_call_ns": costs.as_metadata(),
            "calibration": cal.summary(),
        }
    if profiler.settings.mode == "sample":
        why = "sample mode: no cost per call"
    elif not profiler._compensate():
        why = "turned off (--no-compensate, PROFKIT_COMPENSATE=0)"
    elif profiler._recorder is None:
        why = "the pure Python recorder is not calibrated"
    elif profiler._emit is not None:
        why = "event lines are on (the calibration would write lines)"
    elif cal is None or (cal.token is None and cal.cached is None):
        why = "not calibrated (only profkit run calibrates, when recording starts)"
    elif profiler.settings.basetime_ns > 0:
        why = "the base time cuts the calibration's calls (all but the slowest)"
    else:
        why = "the calibration recorded nothing"
    return {"applied": False, "why": why}


def _thread_tree(mark: ThreadMark, root: CallNode, info: ProfilerInfo | None) -> ThreadTree:
    """A recorded thread's tree, named as the thread is named now (or was, if gone)."""
    return ThreadTree(mark.ident, mark.current_name(info), root, mark.native_id)

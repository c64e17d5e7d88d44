"""The ELT call-tree profiler: enter/leave/yield/resume → per-thread call trees and event lines.

After the ELTProfiler article (``CallHistory``: a depth stack, a duration per call, one
line per event), rebuilt on :mod:`profkit.api` without its faults:

* **Capture-time namespace filter.** The prefix is given to
  :meth:`ProfilerInfo.set_function_filter`, so code outside it is never delivered (on
  ``sys.monitoring`` it runs at full speed); its time stays in the nearest shown caller.
* **Base time without orphans.** An ``Enter`` line is *held* until the call is known to be
  shown (it lasted ≥ the base time, or a shown descendant appeared, or it has already been
  running for the base time), then written once; nothing is ever re-printed or retracted.
* **Generators and coroutines.** Each activation (start or resume → yield or return) is one
  call of its node, placed under whoever resumed it, as cProfile counts them; time spent
  suspended is charged to nobody (it is not the coroutine's).
* **Threads.** One stack per thread (a ``threading.local``), one tree per thread.

Clock: :func:`time.perf_counter_ns`, bound at import so a program that mocks ``time``
(freezegun) cannot disturb it; tests inject a fake clock instead.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from profkit.api import EventMask, FunctionInfo, ProfilerCallback, ProfilerInfo
from profkit.api.ids import FunctionId, ThreadId
from profkit.api.names import prefix_matches
from profkit.calltree.model import CallProfile
from profkit.profilers.elt import calibrate, ccalls, native
from profkit.profilers.elt.attach import AttachWatch
from profkit.profilers.elt.build import Results
from profkit.profilers.elt.config import EltSettings
from profkit.profilers.elt.names import INTERNAL_MODULES, PROFKIT_MAIN, full_name, module_of
from profkit.profilers.elt.sampling import SampleHooks
from profkit.profilers.elt.sinks import LineFlusher, Sink, TextSink, UdpSender
from profkit.profilers.elt.threads import ThreadMark, this_thread
from profkit.profilers.elt.trace import Stack, TraceHooks
from profkit.profilers.elt.tree import Node

_perf_counter_ns = time.perf_counter_ns
_time_ns = time.time_ns
#: Whether the C recorder's own ``CLOCK_MONOTONIC`` reads equal ``perf_counter_ns``'s.
_PERF_COUNTER_IS_MONOTONIC = (
    time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
)

__all__ = ["INTERNAL_MODULES", "EltProfiler", "SamplingProfiler", "full_name", "module_of"]

#: Most spans a timeline keeps (about 200 MB of tuples); later calls are counted, not kept.
SPAN_CAP = 1_000_000


class EltProfiler(TraceHooks, SampleHooks, Results, AttachWatch, ProfilerCallback):
    """Call-tree profiler (``mode=trace``) or stack-sampling profiler (``mode=sample``).

    Loadable by environment activation as ``profkit.profilers.elt:EltProfiler``: the
    start-up hook calls :meth:`from_settings` with the parsed ``PROFKIT_*`` settings and
    a function that saves the profile (``profkit.runner.activation``). ``clock`` and
    ``on_line`` (receives each event line synchronously, instead of the stream/UDP sinks)
    exist for tests and embedding. A ``paused`` profiler records nothing until
    :meth:`start_events` (``profkit run`` starts it once ``attach`` has returned, so the
    collector's own start-up work is not in the profile); a ``standalone`` one (the
    default) starts by itself once the collector's ``attach`` has returned.
    ``on_profile`` receives the profile :meth:`shutdown` builds (saving it is the
    caller's business, not the profiler's).
    """

    mode_override: str | None = None

    def __init__(
        self,
        settings: EltSettings | None = None,
        *,
        clock: Callable[[], int] | None = None,
        standalone: bool = True,
        on_line: Callable[[str], None] | None = None,
        paused: bool = False,
        on_profile: Callable[[CallProfile], None] | None = None,
        main_module: tuple[str, str] | None = None,
        internal_files: Iterable[str] = (),
    ) -> None:
        if settings is None:
            raise TypeError(
                f"{type(self).__name__} needs its settings, e.g. "
                f"{type(self).__name__}(profkit.settings.Settings(...))"
            )
        if self.mode_override is not None:
            settings = settings.replace(mode=self.mode_override)
        self.settings = settings
        self.standalone = standalone
        self.on_profile = on_profile
        self._clock = clock or _perf_counter_ns
        self._basetime = settings.basetime_ns
        self._unit = settings.unit
        self._prefixes = settings.prefixes
        self._info: ProfilerInfo | None = None
        self._local = threading.local()
        self._paused = paused
        self._resume_after_attach = False
        self._attach_frame: FrameType | None = None
        self._lock = threading.Lock()
        # (thread ident, name, stack) for every thread seen; stack[0] is its root node.
        self._stacks: list[tuple[ThreadMark, Stack]] = []
        self._samples: dict[ThreadId, tuple[str, int | None, Node]] = {}
        self._accepted: dict[FunctionId, bool] = {}
        self._names: dict[FunctionId, str] = {}
        self._flusher: LineFlusher | None = None
        # Event lines go to _emit: the flusher queue's append, or ``on_line`` (tests).
        self._emit: Callable[[str], None] | None = None
        self._on_line = on_line
        self._udp: UdpSender | None = None
        self._started_ns = 0
        self._started_wall_ns = 0
        self._closed_open_calls = 0
        timeline = settings.timeline and settings.mode != "sample"
        self._spans = [] if timeline else None
        self._span_cap = SPAN_CAP
        self._spans_dropped = 0
        #: trace mode's C recorder (``use_native``), or None on the pure Python paths
        self._recorder: Any = None
        #: the C recorder's own sys.monitoring tool for C calls, while it runs
        self._c_hook: ccalls.MonitoringHook | None = None
        tracing = settings.mode != "sample"
        self._native_wanted = tracing and native.wanted(settings.native)
        #: lines for the end of the run: a missing C hot path (native.missing_note)
        self.notes = [n for n in [native.missing_note(settings.native)] if n and tracing]
        #: the cost of a recorded call, measured when ``profkit run`` starts recording
        #: (:mod:`~profkit.profilers.elt.calibrate`); None when nothing is compensated
        self._calibration: calibrate.Calibration | None = None
        self.profile: CallProfile | None = None
        #: (file, module name) of a module run as ``__main__`` (``profkit run -m``)
        self.main_module: tuple[str, str] | None = main_module
        #: source files never shown whatever their module: profkit's entry points
        #: (``profkit run`` adds its console script)
        self.internal_files: frozenset[str] = frozenset({PROFKIT_MAIN, *internal_files})

    @classmethod
    def from_settings(
        cls, settings: EltSettings, on_profile: Callable[[CallProfile], None] | None = None
    ) -> EltProfiler:
        """The start-up hook's constructor: parsed settings in, the profile out at shutdown."""
        return cls(settings, on_profile=on_profile)

    # -- lifecycle --------------------------------------------------------------------
    def initialize(self, info: ProfilerInfo) -> None:
        """Select events, install the namespace filter, open the line sinks."""
        self._info = info
        self._started_ns = self._clock()
        self._started_wall_ns = _time_ns()
        if self.standalone and not self._paused and self.settings.mode != "sample":
            self._paused = self._resume_after_attach = True
            self._note_attach_frame()
        if self.settings.mode == "sample":
            info.set_event_mask(EventMask.SAMPLING)
        else:
            # Sinks first: use_lines()/use_closures() swap the callbacks, and the collector
            # binds them when the mask is set.
            self._open_sinks()
            if self._native_wanted:
                self.use_native()
            elif self._emit is None:
                self.use_closures()
            if (
                self._recorder is not None
                and self._emit is None
                and self._compensate()
                and not self._resume_after_attach  # no start_events: step 2 never runs
            ):
                # Unprofiled times now, while no hook exists yet (calibrate.py, step 1):
                # the C-call tool's CALL events start in _c_call_events. Only a profiler
                # waiting for start_events (profkit run's): a child's never used it.
                self._calibration = calibrate.Calibration()
                self._calibration.measure_bare()
            info.set_event_mask(EventMask.ENTER_LEAVE | self._c_call_events())
        info.set_function_filter(self.accepts)

    def _compensate(self) -> bool:
        """Whether recorded times lose the profiler's own cost per call (optional
        setting: an object without it means True)."""
        return bool(getattr(self.settings, "compensate", True))

    def _c_call_events(self) -> EventMask:
        """Arrange for C calls to become nodes (:mod:`~profkit.profilers.elt.ccalls`):
        the C recorder's own ``sys.monitoring`` tool where it can have one, else the
        collector's transitions (the extra mask bits returned) into the enter/leave
        callbacks, which treat a C function's id like any other."""
        if not getattr(self.settings, "c_calls", True):
            return EventMask.NONE
        if self._recorder is not None and ccalls.MonitoringHook.available():
            hook = ccalls.MonitoringHook(self._recorder)
            if hook.start():
                self._c_hook = hook
                # A profiler dropped without shutdown must not keep the tool id.
                weakref.finalize(self, hook.stop)
                return EventMask.NONE
        self.python_to_native_transition = self.function_enter  # type: ignore[method-assign]
        self.native_to_python_transition = self.function_leave  # type: ignore[method-assign]
        return EventMask.CODE_TRANSITIONS

    def _stop_c_calls(self) -> None:
        hook, self._c_hook = self._c_hook, None
        if hook is not None:
            self.c_calls_given_up = hook.given_up or getattr(self, "c_calls_given_up", False)
            hook.stop()

    def _open_sinks(self) -> None:
        if self._on_line is not None:
            self.use_lines(self._on_line)
            return
        sinks: list[Sink] = []
        if self.settings.stream:
            sinks.append(TextSink(self.settings.stream))
        if self.settings.udp is not None:
            self._udp = UdpSender(self.settings.udp)
            sinks.append(self._udp)
        if sinks:
            self._flusher = LineFlusher(sinks)
            self.use_lines(self._flusher.append)
            self._flusher.start()

    def accepts(self, info: FunctionInfo) -> bool:
        """The capture-time filter: inside a prefix (if any) and not profkit's machinery."""
        if info.filename == calibrate.FILE:
            return True  # the calibration's code, on a thread dropped from the profile
        module = module_of(info, self.main_module)
        if prefix_matches(module, INTERNAL_MODULES) or info.filename in self.internal_files:
            return False
        return not self._prefixes or prefix_matches(module, self._prefixes)

    def start_events(self) -> None:
        """Start recording (after a ``paused`` construction).

        While paused, no thread kept a stack (each event got a throwaway one), so the
        next event on any thread starts a real one.
        """
        if self._calibration is not None:
            # calibrate.py, step 2, while still paused: this thread's own events (starting
            # and joining the calibration's thread) are not recorded; that thread's are.
            self._calibration.run_profiled()
        self._started_ns = self._clock()
        self._paused = False

    def stop_events(self) -> None:
        """Stop receiving events now (before detaching), so that no code run afterwards
        — profkit's own detach and reporting — lands in the profile."""
        # This thread continues on a silent stack (its real one stays registered for
        # build_profile); new threads get throwaway ones; the mask turns the rest off.
        self._paused = True
        self.quiet_this_thread()
        self._stop_c_calls()
        if self._info is not None:
            with contextlib.suppress(Exception):
                self._info.set_event_mask(EventMask.NONE)

    def quiet_this_thread(self) -> None:
        """Record nothing more on the calling thread (its stack so far is kept).

        ``profkit run`` calls it when the program's main code has ended and it only
        waits for the program's other threads, which go on being recorded.
        """
        if self._recorder is not None:
            self._recorder.quiet_this_thread()
            return
        silent = Node(None)
        silent.kind = -1
        self._local.stack = [silent]

    def shutdown(self) -> None:
        """Build :attr:`profile` and hand it to ``on_profile``.

        The C recorder is stopped first: with nothing more to record, its export takes
        the call trees and turns them into rows in their own memory instead of copying
        them (the end of a long run's peak memory, issue #11). So the profile is built
        once; a later :meth:`build_profile` finds no calls."""
        self._stop_c_calls()
        if self._flusher is not None:
            self._flusher.close()
        if self._recorder is not None:
            self._recorder.stop()
        self.profile = self.build_profile()
        if self.on_profile is not None:
            self.on_profile(self.profile)

    def _thread_verdict(self) -> bool | None:
        """Whether to record the thread of a first event: True to record it; False not
        yet (paused: the event is profkit's own start-up, ask again at the next one); None
        never (profkit's own line flusher). Shared by both hot paths."""
        calibration = self._calibration
        if calibration is not None and calibration.is_calibration_thread():
            return True  # recorded even while paused (it runs before the program)
        if self._paused:
            if not (self._resume_after_attach and self._attach_done()):
                return False
            self._paused = False
        if self._flusher is not None and threading.current_thread() is self._flusher.thread:
            return None
        return True

    def _new_thread(self) -> Stack:
        """First event on a thread: its stack starts with the thread's root node."""
        root = Node(None)
        root.kind = 1  # stack entries whose line is written (the root's own counts)
        stack = [root]
        verdict = self._thread_verdict()
        if not verdict:
            root.kind = -1  # silent: thrown away (False), or kept on the fast path (None)
            if verdict is None:
                self._local.stack = stack
            return stack
        self._local.stack = stack
        with self._lock:
            self._stacks.append((this_thread(), stack))
        return stack

    def use_native(self) -> None:
        """Record through the C recorder (:mod:`profkit.profilers.elt.native`).

        Its ``enter``/``resume``/``leave``/``yield_`` become the callbacks; the collector
        sees they offer ``sys.monitoring``-shaped forms and registers those directly. Event
        lines (``_emit``, set by :meth:`use_lines` before this) and the timeline are
        written by the recorder too, by the rules of :mod:`~profkit.profilers.elt.lines`.
        The recorder reads ``CLOCK_MONOTONIC`` itself when that is what
        :func:`time.perf_counter_ns` reads (so its times compare with ``_started_ns``);
        any other clock (a test's) is called.
        """
        recorder_type = native.Recorder
        assert recorder_type is not None  # use_native is only called when it was built
        own_clock = self._clock is _perf_counter_ns and _PERF_COUNTER_IS_MONOTONIC
        # The recorder reaches back weakly: its c_call/c_return are sys.monitoring
        # callbacks (a process-wide registry), so a strong reference to this profiler would
        # keep it, and its C-call tool id, alive forever once dropped without detaching.
        recorder = self._recorder = recorder_type(
            _weakly(self._new_native_thread),
            self._basetime,
            clock=None if own_clock else self._clock,
            emit=self._emit,
            name=_weakly(self._name),
            unit=self._unit,
            span_cap=-1 if self._spans is None else self._span_cap,
        )
        self.function_enter = recorder.enter  # type: ignore[assignment]
        self.function_resume = recorder.resume  # type: ignore[assignment]
        self.function_leave = recorder.leave  # type: ignore[assignment]
        self.function_yield = recorder.yield_  # type: ignore[assignment]

    def _new_native_thread(self) -> object:
        """The C recorder's first event on a thread: the :meth:`_new_thread` decisions.

        Returns the thread's token (a :class:`ThreadMark`) to record it, ``False`` for a throwaway
        answer while paused (asked again at the next event), or ``None`` for silence.
        """
        verdict = self._thread_verdict()
        if not verdict:
            return verdict
        calibration = self._calibration
        if calibration is not None and calibration.is_calibration_thread():
            # Not this_thread(): threading may not have registered it yet, and
            # current_thread() would make a dummy Thread (moving the names' counter).
            token = ThreadMark(threading.get_ident(), "profkit-calibration", None, None)
            calibration.token = token
            return token
        return this_thread()

    def _name(self, function_id: FunctionId) -> str:
        name = self._names.get(function_id)
        if name is None:
            name = self._names[function_id] = self._display_name(self._function_info(function_id))
        return name

    def _display_name(self, info: FunctionInfo) -> str:
        """How reports name a function: C functions as users know them."""
        return ccalls.native_name(info) if info.is_native else full_name(info, self.main_module)

    def _function_info(self, function_id: FunctionId) -> FunctionInfo:
        assert self._info is not None
        return self._info.get_function_info(function_id)


class SamplingProfiler(EltProfiler):
    """The same profiler in sample mode (``profkit.profilers.elt:SamplingProfiler``)."""

    mode_override = "sample"


def _weakly(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` called through a weak reference to its object (None once it is gone)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        target = ref()
        return None if target is None else target(*args)

    return call

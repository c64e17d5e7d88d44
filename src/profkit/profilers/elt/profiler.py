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

from profkit.api import CallEvents, EventMask, FunctionInfo, ProfilerInfo
from profkit.api.ids import FunctionId, ThreadId
from profkit.calltree.model import CallProfile
from profkit.profilers.base import SettingsProfiler
from profkit.profilers.elt import calcache, calibrate, ccalls, forked, native
from profkit.profilers.elt.attach import AttachWatch
from profkit.profilers.elt.build import Results
from profkit.profilers.elt.config import EltSettings
from profkit.profilers.elt.names import INTERNAL_MODULES, full_name, module_of
from profkit.profilers.elt.threads import ThreadMark, this_thread
from profkit.profilers.elt.trace import LineRecorder, PythonRecorder, Stack
from profkit.profilers.elt.tree import Node

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:  # imported where used: most runs neither sample nor write event lines
    from typing import Any

    from profkit.profilers.elt.sampling import SampledTrees
    from profkit.profilers.elt.sinks import LineFlusher, UdpSender

_perf_counter_ns = time.perf_counter_ns
_time_ns = time.time_ns

__all__ = ["INTERNAL_MODULES", "EltProfiler", "SamplingProfiler", "full_name", "module_of"]

#: Most spans a timeline keeps (about 200 MB of tuples); later calls are counted, not kept.
SPAN_CAP = 1_000_000


class EltProfiler(Results, SettingsProfiler):
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

    Trace mode records through one of three recorders, chosen in ``initialize``: the C
    one (:mod:`~profkit.profilers.elt.native`), the pure-Python one, or the pure-Python
    one writing event lines (:mod:`~profkit.profilers.elt.trace`). The profiler keeps
    the threads' stacks and decides which threads are recorded; the recorder's callbacks
    go to the collector as they are (:meth:`call_events`), with no method of the
    profiler's in between. Sample mode's trees are :class:`SampledTrees`'.
    """

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
        super().__init__(
            settings,
            standalone=standalone,
            paused=paused,
            on_profile=on_profile,
            main_module=main_module,
            internal_files=internal_files,
        )
        settings = self.settings
        self._clock = clock or _perf_counter_ns
        self._basetime = settings.basetime_ns
        self._unit = settings.unit
        self._local = threading.local()
        self._resume_after_attach = False
        self._watch = AttachWatch(self.stop_events)
        self._lock = threading.Lock()
        # (thread ident, name, stack) for every thread seen; stack[0] is its root node.
        self._stacks: list[tuple[ThreadMark, Stack]] = []
        self._sampled: SampledTrees | None = None
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
        self._spans: list[tuple[int, int, int, int, int]] | None = [] if timeline else None
        self._span_cap = SPAN_CAP
        self._spans_dropped = 0
        #: trace mode's C recorder (``use_native``), or None on the pure Python paths
        self._recorder: Any = None
        #: trace mode's pure-Python recorder (with or without event lines), or None
        self._python: PythonRecorder | None = None
        #: what the collector calls on enter/leave (:meth:`call_events`), once chosen
        self._events: CallEvents | None = None
        #: the C recorder's own sys.monitoring tool for C calls, while it runs
        self._c_hook: ccalls.MonitoringHook | None = None
        tracing = settings.mode != "sample"
        self._native_wanted = tracing and native.wanted(settings.native)
        #: lines for the end of the run: a missing C hot path (native.missing_note)
        self.notes = [n for n in [native.missing_note(settings.native)] if n and tracing]
        #: the cost of a recorded call, measured when ``profkit run`` starts recording
        #: (:mod:`~profkit.profilers.elt.calibrate`); None when nothing is compensated
        self._calibration: calibrate.Calibration | None = None

    # -- lifecycle --------------------------------------------------------------------
    def initialize(self, info: ProfilerInfo) -> None:
        """Select events, install the namespace filter, open the line sinks."""
        self._info = info
        self._started_ns = self._clock()
        self._started_wall_ns = _time_ns()
        if self.standalone and not self._paused and self.settings.mode != "sample":
            self._paused = self._resume_after_attach = True
            self._watch.note()
        if self.settings.mode == "sample":
            from profkit.profilers.elt.sampling import SampledTrees

            self._sampled = SampledTrees(info, self.accepts)
            info.set_event_mask(EventMask.SAMPLING)
        else:
            # Sinks first: the recorder writes lines through them, and the collector binds
            # the recorder's callbacks when the mask is set.
            self._open_sinks()
            self.choose_recorder()
            if (
                self._recorder is not None
                and self._emit is None
                and self._compensate()
                and not self._resume_after_attach  # no start_events: step 2 never runs
            ):
                # Unprofiled times now, while no hook exists yet (calibrate.py, step 1):
                # the C-call tool's CALL events start in _c_call_events. Only a profiler
                # waiting for start_events (profkit run's): a child's never used it.
                # Or, once earlier runs measured them, the costs they kept (calcache.py).
                self._calibration = calibrate.Calibration(
                    cache=calcache.for_run(info, self.settings)
                )
                self._calibration.measure_bare()
            info.set_event_mask(EventMask.ENTER_LEAVE | self._c_call_events())
        info.set_function_filter(self.accepts)

    def choose_recorder(self) -> None:
        """Trace mode's recorder for the settings and sinks (called by ``initialize``;
        again by a test that changed them): the C one when wanted, else pure Python."""
        if self._native_wanted:
            self.use_native()
            return
        parts = (self._local, self._clock, self._basetime, self._new_thread, self._name)
        options: dict[str, Any] = {
            "names": self._names,
            "unit": self._unit,
            "spans": self._spans,
            "span_cap": self._span_cap,
        }
        self._recorder = None
        if self._emit is None:
            self._python = PythonRecorder(*parts, **options)
        else:
            self._python = LineRecorder(*parts, emit=self._emit, **options)
        self._events = self._python.call_events()

    def call_events(self) -> CallEvents | None:
        """The recorder's callbacks (:class:`~profkit.api.CallEvents`), bound by the
        collector as they are; None in sample mode."""
        return self._events

    def stack_sample(
        self,
        thread_id: ThreadId,
        function_ids: tuple[FunctionId, ...],
        timestamp_ns: int,
        weight_ns: int,
    ) -> None:
        """Sample mode: one sample into its thread's tree (nothing while paused)."""
        if not self._paused and self._sampled is not None:
            self._sampled.add(thread_id, function_ids, weight_ns)

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
        events = self._events
        if events is not None:
            self._events = CallEvents(
                function_enter=events.function_enter,
                function_leave=events.function_leave,
                function_yield=events.function_yield,
                function_resume=events.function_resume,
                python_to_native_transition=events.function_enter,
                native_to_python_transition=events.function_leave,
            )
        return EventMask.CODE_TRANSITIONS

    def _stop_c_calls(self) -> None:
        hook, self._c_hook = self._c_hook, None
        if hook is not None:
            self.c_calls_given_up = hook.given_up or getattr(self, "c_calls_given_up", False)
            hook.stop()

    def _open_sinks(self) -> None:
        if self._on_line is not None:
            self._emit = self._on_line
        elif self.settings.stream or self.settings.udp is not None:
            from profkit.profilers.elt.sinks import open_sinks  # only with event lines

            self._flusher, self._udp = open_sinks(self.settings.stream, self.settings.udp)
            self._emit = self._flusher.append

    def accepts(self, info: FunctionInfo) -> bool:
        """The capture-time filter (:meth:`SettingsProfiler.accepts`), which also lets the
        calibration's code through (on a thread dropped from the profile)."""
        return info.filename == calibrate.FILE or super().accepts(info)

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

    #: in a forked child (:mod:`.forked`): record it alone; a ``run`` child: its settings, saver
    reset_after_fork, adopt_after_fork = forked.reset, forked.adopt

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
        self.profile = self.build_stopped()
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
            if not (self._resume_after_attach and self._watch.done()):
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
        """Record through the C recorder (:func:`profkit.profilers.elt.native.recorder`):
        its methods become the callbacks (the collector registers their
        ``sys.monitoring``-shaped forms directly); it writes event lines (``_emit``, set by
        ``_open_sinks`` before this) and the timeline itself."""
        recorder = self._recorder = native.recorder(
            self._new_native_thread,
            self._name,
            self._basetime,
            None if self._clock is _perf_counter_ns else self._clock,
            emit=self._emit,
            unit=self._unit,
            span_cap=-1 if self._spans is None else self._span_cap,
        )
        self._python = None
        self._events = native.call_events(recorder)

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


class SamplingProfiler(EltProfiler):
    """The same profiler in sample mode (``profkit.profilers.elt:SamplingProfiler``)."""

    mode_override = "sample"

"""The session: one attached profiler, its ``ProfilerInfo``, and the running backends.

The session is the api/collect boundary. It owns the id tables, the event mask and
filter, the per-thread shadow stacks, and the failure rule: a profiler that raises is
reported once on stderr and detached, and the program goes on unaffected.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from types import CodeType, FrameType
from typing import Any

from profkit.api.callback import ProfilerCallback
from profkit.api.errors import (
    ImmutableFlagError,
    NotAvailableError,
    UnknownIdError,
    UnsupportedEventError,
)
from profkit.api.events import IMMUTABLE, EventMask
from profkit.api.ids import FunctionId, ModuleId, ThreadId
from profkit.api.info import FunctionInfo, ModuleInfo, ProfilerInfo, ThreadInfo
from profkit.collect.base import Backend
from profkit.collect.plan import Plan, make_plan
from profkit.collect.registry import FunctionTable, ModuleTable, ThreadTable

_PKG = __file__.rsplit("/", 2)[0]  # .../profkit
#: profkit's own collector/api/profiler code is never profiled (no recursion, no noise).
_OWN_DIRS = tuple(f"{_PKG}/{sub}/" for sub in ("collect", "api", "profilers"))
_get_ident = threading.get_ident


class Session:
    """The :class:`~profkit.api.ProfilerInfo` implementation for one attached profiler."""

    def __init__(
        self,
        profiler: ProfilerCallback,
        *,
        sample_interval: float = 0.001,
        sample_clock: str = "wall",
        report: Callable[[str], None] | None = None,
        native: bool = True,
    ) -> None:
        self.profiler = profiler
        self.native = native  #: may the backends use their C parts
        self.profiler_name = f"{type(profiler).__module__}.{type(profiler).__qualname__}"
        self.sample_interval = sample_interval
        self.sample_clock = sample_clock
        self.functions = FunctionTable()
        self.modules = ModuleTable()
        self.threads = ThreadTable(_get_ident)
        self.mask = EventMask.NONE
        self.plan = Plan(EventMask.NONE)
        self.filter: Callable[[FunctionInfo], bool] | None = None
        self.function_events: dict[int, EventMask] = {}
        self.backend: Backend | None = None
        self.extras: list[Backend] = []  #: sampler and aux hooks running beside the backend
        self.capabilities_events = EventMask(~0 & _ALL)
        self.requested_backend = "auto"  #: what attach() was asked for, until a backend runs
        self.initializing = False
        self.active = False
        self.failed = False
        self._lock = threading.RLock()
        self._report = report or _stderr_line
        #: id(frame) → id(code) of frames running at attach (never "entered"). Not the
        #: frames themselves: holding them would keep their locals alive after they return,
        #: which a program could notice (finalizers, file closing).
        self.attach_frames: dict[int, int] = {}
        self._own_codes = _own_codes(profiler)

    # -- ProfilerInfo --------------------------------------------------------------------
    @property
    def backend_name(self) -> str:
        """The collector in use."""
        return self.backend.name if self.backend is not None else self.requested_backend

    def set_event_mask(self, mask: EventMask) -> None:
        """Select notifications (see :meth:`profkit.api.ProfilerInfo.set_event_mask`)."""
        mask = EventMask(mask)
        if not self.initializing and (mask ^ self.mask) & IMMUTABLE:
            changed = EventMask((mask ^ self.mask) & IMMUTABLE)
            raise ImmutableFlagError(
                f"event-mask bits {changed!r} are immutable: set them in initialize()"
            )
        missing = mask & ~self.capabilities_events
        if missing:
            raise UnsupportedEventError(
                f"the {self.backend_name} backend cannot deliver {EventMask(missing)!r}"
            )
        with self._lock:
            self.mask = mask
            self.plan = make_plan(self.profiler, mask)
            if self.active:
                self._rearm()

    def get_event_mask(self) -> EventMask:
        """The current event mask."""
        return self.mask

    def set_function_filter(self, accept: Callable[[FunctionInfo], bool]) -> None:
        """Decide once per function whether its notifications are delivered."""
        with self._lock:
            self.filter = accept
            self.functions.accepted.clear()
            if self.active:
                self._rearm()

    def set_function_events(self, function_id: FunctionId, mask: EventMask) -> None:
        """Override the filter for one function (see :class:`~profkit.api.ProfilerInfo`)."""
        self.functions.info(function_id)  # validates the id
        with self._lock:
            self.function_events[function_id] = EventMask(mask)
            self.functions.accepted.pop(function_id, None)
            if self.active:
                self._rearm()

    def get_function_info(self, function_id: FunctionId) -> FunctionInfo:
        """What is known about a function id."""
        return self.functions.info(function_id)

    def get_module_info(self, module_id: ModuleId) -> ModuleInfo:
        """What is known about a module id."""
        return self.modules.info(module_id)

    def get_thread_info(self, thread_id: ThreadId) -> ThreadInfo:
        """What is known about a thread id."""
        return self.threads.info(thread_id)

    def get_current_thread_id(self) -> ThreadId:
        """The calling thread's id (``threading.get_ident()``)."""
        return ThreadId(_get_ident())

    def iter_threads(self) -> Iterable[ThreadId]:
        """Live threads."""
        return self.threads.live()

    def get_shadow_stack(self, thread_id: ThreadId) -> tuple[FunctionId, ...]:
        """The stack of accepted functions that were entered, outermost first.

        The CLR keeps a shadow stack because walking a native stack is expensive. CPython
        already keeps exactly this stack as linked frames (a suspended generator is off it,
        a resumed one on it, an unwound frame gone), so profkit reads it on demand instead
        of pushing and popping per event: the same answer, and zero cost per event.
        Frames that were already running at attach (never entered) are left out (by frame
        address and code, so a later frame at a reused address could rarely be left out
        too). During a notification about function F, F is on top.
        """
        if not self.mask & EventMask.ENABLE_SHADOW_STACK:
            raise NotAvailableError("get_shadow_stack needs EventMask.ENABLE_SHADOW_STACK")
        frame = self._frame_of(thread_id)
        pre = self.attach_frames
        out: list[FunctionId] = []
        accepted = self.functions.accepted
        while frame is not None:
            code = frame.f_code
            ok = accepted.get(id(code))
            if ok is None:
                ok = self.discover(code)[1]
            if ok and pre.get(id(frame)) != id(code):
                out.append(FunctionId(id(code)))
            frame = frame.f_back
        out.reverse()
        return tuple(out)

    def _frame_of(self, thread_id: ThreadId) -> FrameType | None:
        if thread_id == _get_ident():
            return sys._getframe(2)
        frame = sys._current_frames().get(thread_id)
        if frame is None:
            raise UnknownIdError(f"thread {thread_id} is not running Python code")
        return frame

    def do_stack_snapshot(self, thread_id: ThreadId) -> tuple[FunctionId, ...]:
        """The thread's live Python frames now, outermost first (profkit's own omitted)."""
        if not self.mask & EventMask.ENABLE_STACK_SNAPSHOT:
            raise NotAvailableError("do_stack_snapshot needs EventMask.ENABLE_STACK_SNAPSHOT")
        frame = self._frame_of(thread_id)
        return self.frames_to_ids(frame, accepted_only=False)

    def request_profiler_detach(self) -> None:
        """Remove every hook; ``profiler_detach_succeeded`` then ``shutdown`` follow."""
        self.detach(detach_callback=True)

    # -- used by backends ----------------------------------------------------------------
    def discover(self, code: CodeType) -> tuple[FunctionId, bool]:
        """Slow path for a code object: register it, deliver first execution, filter it.

        Returns the id and whether the function's notifications are wanted.
        """
        functions = self.functions
        fid, new = functions.add_code(code)
        if new and self.plan.first_execution is not None and not self._is_own(code):
            self.call("function_first_execution", self.plan.first_execution, fid)
        verdict = functions.accepted.get(fid)
        if verdict is None:
            verdict = self._judge(fid, code)
            if verdict is None:
                return fid, False  # the filter hit the recursion limit: ask it next time
            functions.accepted[fid] = verdict
        return fid, verdict

    def _judge(self, fid: FunctionId, code: CodeType) -> bool | None:
        if self._is_own(code):
            return False
        special = self.function_events.get(fid)
        if special is not None:
            return bool(
                special
                & (EventMask.ENTER_LEAVE | EventMask.CODE_TRANSITIONS | EventMask.EXCEPTIONS)
            )
        accept = self.filter
        if accept is None:
            return True
        try:
            return bool(accept(self.functions.info(fid)))
        except RecursionError:
            return None  # the program's (Session.fail); calling fail here could overflow again
        except Exception as exc:
            self.fail(exc, "function filter")
            return False

    def _is_own(self, code: CodeType) -> bool:
        return code.co_filename.startswith(_OWN_DIRS) or id(code) in self._own_codes

    def frames_to_ids(
        self, frame: FrameType | None, *, accepted_only: bool
    ) -> tuple[FunctionId, ...]:
        """Walk ``f_back`` from ``frame``; ids outermost first."""
        out: list[FunctionId] = []
        accepted = self.functions.accepted
        codes = self.functions.codes
        while frame is not None:
            code = frame.f_code
            fid = id(code)
            ok = accepted.get(fid)
            if ok is None or fid not in codes:
                fid, ok = self.discover(code)
            if ok or (not accepted_only and not self._is_own(code)):
                out.append(FunctionId(fid))
            frame = frame.f_back
        out.reverse()
        return tuple(out)

    def call(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """Call a profiler method outside the hot path, applying the failure rule."""
        try:
            fn(*args)
        except RecursionError:
            pass  # the program's (Session.fail); calling fail here could overflow again
        except Exception as exc:
            self.fail(exc, what)

    def fail(self, exc: BaseException, what: str) -> None:
        """The profiler raised: report once, detach, let the program go on.

        A ``RecursionError`` is the program's, not the profiler's: the program is at its
        recursion limit and the callback's frames pushed it over. That one notification is
        skipped and the profiler stays attached; a frame's enter and leave run at the same
        depth, so they are skipped together and stay paired.

        An exception raised by one of the program's signal handlers is the program's too:
        a handler runs wherever the main thread is, often inside a callback. It is raised
        again, into the program, where it would have surfaced without profiling.
        """
        if isinstance(exc, RecursionError) and what != "initialize":
            return
        if _from_signal_handler(exc):
            raise exc  # the program's: its signal handler ran inside the callback
        with self._lock:
            if self.failed:
                return
            self.failed = True
        self._report(
            f"profkit: profiler {self.profiler_name} failed in {what}: "
            f"{type(exc).__name__}: {exc}; detached"
        )
        self.detach()

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, backend: Backend, extras: list[Backend]) -> None:
        """Start the backend and the extras (sampler, aux hooks)."""
        with self._lock:
            self.backend = backend
            self.extras = extras
            self.active = True
            for top in sys._current_frames().values():
                f: FrameType | None = top
                while f is not None:
                    self.attach_frames[id(f)] = id(f.f_code)
                    f = f.f_back
            # Side hooks first and the tracing backend last: a profiler failing on the
            # first event detaches, and nothing may be installed after that.
            for part in [*extras, backend]:
                if not self.active:
                    break
                part.start()
            if not self.active:
                for part in [*extras, backend]:
                    part.stop()

    def _rearm(self) -> None:
        for part in [self.backend, *self.extras]:
            if part is not None:
                part.rearm()

    def detach(self, *, detach_callback: bool = False, shutdown: bool = True) -> None:
        """Stop every hook and call ``shutdown`` exactly once. Idempotent.

        ``shutdown=False`` is for a forked child: the profiler object there is a copy of
        the parent's, whose results belong to the parent, so it is dropped silently.
        """
        with self._lock:
            if not self.active:
                return
            self.active = False
        # Stopped outside the lock: stopping the sampler joins its thread, which may be
        # inside ``fail`` (the profiler raised in ``stack_sample``) waiting for that lock.
        # Only the caller that turned ``active`` off gets here, so each part stops once.
        # The tracing backend first: stopping the sampler runs threading code that must
        # not be reported as the program's.
        for part in [self.backend, *self.extras]:
            if part is not None:
                try:  # noqa: SIM105 - no stdlib helper here: its frames would be profiled
                    part.stop()
                except Exception:  # pragma: no cover - stopping must not fail the program
                    pass
        _on_detached(self)
        if not shutdown:
            self.attach_frames.clear()
            return
        if detach_callback:
            self._shutdown_call("profiler_detach_succeeded")
        self._shutdown_call("shutdown")
        self.attach_frames.clear()

    def drop_after_fork(self) -> None:
        """In a forked child: remove the parent's hooks without calling the profiler.

        The session lock is replaced first: another thread of the parent may have held
        it at ``fork()``, and no thread exists here to release it.
        """
        self._lock = threading.RLock()
        self.detach(shutdown=False)

    def _shutdown_call(self, name: str) -> None:
        try:
            getattr(self.profiler, name)()
        except Exception as exc:
            if not self.failed:
                self.failed = True
                self._report(
                    f"profkit: profiler {self.profiler_name} failed in {name}: "
                    f"{type(exc).__name__}: {exc}; detached"
                )


_ALL = 0
for _bit in EventMask:
    _ALL |= int(_bit)


def _stderr_line(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # pragma: no cover - a closed stderr must not break the program
        pass


def _from_signal_handler(exc: BaseException) -> bool:
    """Whether ``exc`` passed through a Python signal handler the program installed.

    Failure path only: it asks ``signal.getsignal`` for every signal.
    """
    if threading.current_thread() is not threading.main_thread():
        return False  # Python signal handlers only ever run on the main thread
    import signal

    codes = set()
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):  # pragma: no cover - platform-specific signals
            continue
        func = getattr(handler, "__func__", handler)
        code = getattr(func, "__code__", None)
        if isinstance(code, CodeType):
            codes.add(code)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


def _own_codes(profiler: ProfilerCallback) -> frozenset[int]:
    """Code objects of the profiler's own methods: never profiled, so no recursion.

    Also the methods ``dataclass`` generated for profkit's info records: their code says
    ``<string>``, not a profkit file, and profkit builds such records on the program's
    threads (a thread ending), which were reported as the program's calls.
    """
    codes = set()
    for record in (FunctionInfo, ModuleInfo, ThreadInfo):
        for value in vars(record).values():
            code = getattr(value, "__code__", None)
            if isinstance(code, CodeType):
                codes.add(id(code))
    for klass in type(profiler).__mro__:
        if klass is ProfilerCallback or klass is object:
            continue
        for value in vars(klass).values():
            func = getattr(value, "__func__", value)
            code = getattr(func, "__code__", None)
            if isinstance(code, CodeType):
                codes.add(id(code))
    return frozenset(codes)


def _on_detached(session: Session) -> None:
    """Tell the module-level entry points that this session is over."""
    from profkit.collect import _forget

    _forget(session)


def _conforms(session: Session) -> ProfilerInfo:
    """mypy checks here that Session implements the ProfilerInfo protocol."""
    return session

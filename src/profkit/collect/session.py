"""The session: one attached profiler's lifecycle and the running backends.

The session owns the event mask and its plan, starts the backend and the side hooks,
re-arms them when the mask or the filter changes, and detaches exactly once. What it
offers the profiler is :class:`~profkit.collect.info.SessionInfo` (the ``ProfilerInfo``),
what it offers the backends is :class:`~profkit.collect.context.BackendContext`; the id
tables live in :class:`~profkit.collect.catalog.Catalog` and the failure rule in
:class:`~profkit.collect.failure.FailureRule`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import FrameType

from profkit.api.callback import ProfilerCallback
from profkit.api.events import EventMask
from profkit.collect import backends, terminate
from profkit.collect.base import Backend
from profkit.collect.catalog import Catalog
from profkit.collect.context import BackendContext
from profkit.collect.failure import FailureRule
from profkit.collect.info import SessionInfo
from profkit.collect.plan import ALL_EVENTS, Plan, make_plan


class Session:
    """One attached profiler: its mask and plan, its backends, and its lifecycle."""

    def __init__(
        self,
        profiler: ProfilerCallback,
        *,
        requested_backend: str = "auto",
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
        #: mean bytes between sampled allocations (OBJECT_ALLOCATED); set in initialize
        self.allocation_sampling: float = 512 * 1024
        self.rule = FailureRule(self.profiler_name, report)
        self.rule.on_failure(self.detach)
        self.catalog = Catalog(profiler, self.rule)
        self.mask = EventMask.NONE
        self.plan = Plan(EventMask.NONE)
        self.backend: Backend | None = None
        self.extras: list[Backend] = []  #: sampler and aux hooks running beside the backend
        #: what attach() was asked for, until a backend runs
        self.requested_backend = requested_backend
        #: what the (requested, later the chosen) backend can deliver
        self.capabilities_events = (
            ALL_EVENTS
            if requested_backend == "auto"
            else backends.capabilities(requested_backend).events
        )
        self.initializing = False
        self.active = False
        self._lock = threading.RLock()
        #: id(frame) → id(code) of frames running at attach (never "entered"). Not the
        #: frames themselves: holding them would keep their locals alive after they return,
        #: which a program could notice (finalizers, file closing).
        self.attach_frames: dict[int, int] = {}
        self.info = SessionInfo(self)

    @property
    def backend_name(self) -> str:
        """The collector in use (what was requested until one runs)."""
        return self.backend.name if self.backend is not None else self.requested_backend

    @property
    def failed(self) -> bool:
        """Whether the profiler failed (and was detached)."""
        return self.rule.failed

    def fail(self, exc: BaseException, what: str) -> None:
        """Apply the failure rule (see :class:`~profkit.collect.failure.FailureRule`)."""
        self.rule.fail(exc, what)

    # -- changes the profiler asks for (validated by SessionInfo) --------------------
    def apply_mask(self, mask: EventMask) -> None:
        """Switch to ``mask``: a new plan, and the running hooks re-read it."""
        with self._lock:
            self.mask = mask
            self.plan = make_plan(self.profiler, mask)
            self.catalog.first_execution = self.plan.first_execution
            if self.active:
                self._rearm()

    def apply_filter(self, change: Callable[[], None]) -> None:
        """Change the catalog's verdicts (``change``), then re-arm the running hooks."""
        with self._lock:
            change()
            if self.active:
                self._rearm()

    # -- lifecycle -----------------------------------------------------------------------
    def initialize(self) -> None:
        """``profiler.initialize(info)``, the one time IMMUTABLE mask bits may change."""
        self.initializing = True
        try:
            self.profiler.initialize(self.info)
        finally:
            self.initializing = False

    def start(self, backend_name: str) -> None:
        """Start the side hooks (and sampler) and then backend ``backend_name``."""
        self.capabilities_events = backends.capabilities(backend_name).events
        ctx = BackendContext(self)
        backend = backends.make(backend_name, ctx)
        extras = _make_extras(ctx, self.mask)
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
        # Counted as a save from before ``active`` turns off: a SIGTERM landing anywhere
        # from here on waits for the save instead of finding nothing left to save
        # (terminate.py), however far stopping the hooks has got.
        if shutdown:
            terminate.saving_began()
        try:
            with self._lock:
                if not self.active:
                    return
                self.active = False
            self._stop_and_shut_down(detach_callback=detach_callback, shutdown=shutdown)
        finally:
            if shutdown:
                terminate.saving_ended()

    def _stop_and_shut_down(self, *, detach_callback: bool, shutdown: bool) -> None:
        # Stopped outside the lock: stopping the sampler joins its thread, which may be
        # inside a profiler call. Only the caller that turned ``active`` off gets here, so
        # each part stops once. The tracing backend first: stopping the sampler runs
        # threading code that must not be reported as the program's.
        self._take_down_parts(abandon=False)
        _on_detached(self)
        if shutdown:
            if detach_callback:
                self.rule.call_at_shutdown(self.profiler, "profiler_detach_succeeded")
            self.rule.call_at_shutdown(self.profiler, "shutdown")
        self.attach_frames.clear()

    def drop_after_fork(self) -> None:
        """In a forked child: remove the parent's hooks without calling the profiler.

        The session lock is replaced first: another thread of the parent may have held
        it at ``fork()``, and no thread exists here to release it.
        """
        self._lock = threading.RLock()
        if not self.active:
            return
        self.active = False
        self._take_down_parts(abandon=True)
        _on_detached(self)

    def reset_after_fork(self) -> bool:
        """In a forked child: go on recording for the child, the hooks kept as they are
        and the profiler reset in place (its ``reset_after_fork()``, which says whether
        it could). False, with nothing changed but the lock, when a part or the profiler
        cannot: the caller then drops this session and attaches a new one.

        Building a new session ran a thousand lines of Python in every child, and each
        page they touched (code objects, dicts, refcounts) was copied from the parent
        (issue 22, item 13); this runs a few dozen.
        """
        self._lock = threading.RLock()  # see drop_after_fork
        parts = [part for part in [self.backend, *self.extras] if part is not None]
        if not self.active or not all(part.resumes_after_fork for part in parts):
            return False
        reset = getattr(self.profiler, "reset_after_fork", None)
        try:  # the profiler's own method: a failure means a new session, never the program's
            if reset is None or not reset():
                return False
        except Exception:
            return False
        for part in parts:
            part.resume_after_fork()
        return True

    def _take_down_parts(self, *, abandon: bool) -> None:
        """Stop (or, in a forked child, abandon) the tracing backend, then the extras;
        a part that fails to stop must not fail the program."""
        for part in [self.backend, *self.extras]:
            if part is not None:
                try:  # not contextlib.suppress: its frames would be profiled
                    if abandon:
                        part.abandon()
                    else:
                        part.stop()
                except Exception:  # pragma: no cover - stopping must not fail the program
                    pass


def _make_extras(ctx: BackendContext, mask: EventMask) -> list[Backend]:
    """Side hooks: the sampler (when SAMPLING) and threads/modules/GC hooks."""
    from profkit.collect.hooks import SideHooks

    extras: list[Backend] = [SideHooks(ctx)]
    if mask & EventMask.SAMPLING:
        from profkit.collect.sampler import Sampler

        extras.append(Sampler(ctx))
    if mask & EventMask.OBJECT_ALLOCATED:
        from profkit.collect.heap_events import HeapEvents

        extras.append(HeapEvents(ctx))
    return extras


def _on_detached(session: Session) -> None:
    """Tell the module-level entry points that this session is over."""
    from profkit.collect import _forget

    _forget(session)

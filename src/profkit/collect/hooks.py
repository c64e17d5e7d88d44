"""Side hooks every backend shares: threads, module loads and garbage collection.

* **Threads**: ``threading.Thread._bootstrap_inner`` is wrapped (class attribute, restored
  at detach), so ``thread_created`` runs on the new thread before its ``run()`` and
  ``thread_destroyed`` after it, whatever ``run`` a subclass defines; the ``Thread.name``
  property is wrapped for ``thread_name_changed``. A ``Thread`` with a true
  ``profkit_internal`` attribute (the sampler; profilers' own helper threads) is silent.
  Threads started with ``_thread``
  directly, and threads already running at attach, get no created/destroyed
  notifications (they are still listed by ``iter_threads`` and traced).
* **Module loads**: a finder at the front of ``sys.meta_path``. A finder only runs for
  modules not yet in ``sys.modules``, i.e. for real loads, whereas wrapping
  ``builtins.__import__`` would add a Python call to every ``import`` statement executed,
  cached or not (many run inside hot functions). The finder asks the finders behind it
  for the spec, reports ``module_load_started``, and wraps that spec's loader's
  ``exec_module`` on the loader *instance* (removed again after the call, so
  ``module.__loader__`` stays the real loader) to report ``module_load_finished``. Loaders
  that are classes (built-in, frozen modules) cannot be wrapped per module: both
  notifications are sent at find time.
* **GC**: ``gc.callbacks``.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

from profkit.api.events import EventMask
from profkit.api.ids import ModuleId, ThreadId
from profkit.collect.base import Capabilities
from profkit.collect.context import BackendContext
from profkit.collect.plan import ALL_EVENTS

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

CAPABILITIES = Capabilities(
    events=ALL_EVENTS, cheap_filter=True, all_threads=False, full_exceptions=False
)

_Thread: Any = threading.Thread
_get_ident = threading.get_ident
_get_native_id = threading.get_native_id
_perf_ns = time.perf_counter_ns


class SideHooks:
    """Installs the thread, import and ``gc.callbacks`` hooks the mask selects."""

    name = "side-hooks"
    capabilities = CAPABILITIES

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self._undo: list[Callable[[], None]] = []

    def start(self) -> None:
        """Install the selected hooks (threads are always tracked for ThreadInfo)."""
        mask = self.ctx.mask
        self._install_threads(bool(mask & EventMask.THREADS))
        if mask & EventMask.MODULE_LOADS:
            self._install_imports()
        if mask & EventMask.GC:
            self._install_gc()

    def stop(self) -> None:
        """Undo every installation, newest first."""
        undo, self._undo = self._undo, []
        for fn in reversed(undo):
            fn()

    def abandon(self) -> None:
        """In a forked child: as :meth:`stop` (nothing of the parent's is torn down)."""
        self.stop()

    #: threading's, the import system's and gc's hooks are the same in a forked child
    resumes_after_fork = True

    def resume_after_fork(self) -> None:
        """In a forked child: nothing to do (every hook is still installed)."""

    def rearm(self) -> None:
        """Re-read the mask (THREADS, MODULE_LOADS and GC are mutable)."""
        self.stop()
        self.start()

    # -- threads -----------------------------------------------------------------------
    def _install_threads(self, notify: bool) -> None:
        ctx = self.ctx
        created = ctx.callback("thread_created") if notify else None
        destroyed = ctx.callback("thread_destroyed") if notify else None
        renamed = ctx.callback("thread_name_changed") if notify else None
        table = ctx.threads
        call = ctx.call
        original = _Thread._bootstrap_inner
        name_prop = _Thread.__dict__["name"]

        def _bootstrap_inner(thread: Any) -> None:
            tid = _get_ident()
            table.seen(tid, thread.name, _get_native_id())
            if getattr(thread, "profkit_internal", False):
                original(thread)  # profkit's own threads (the sampler, line flushers)
                return
            if ctx.active:
                if created is not None:
                    call("thread_created", created, ThreadId(tid))
                if renamed is not None:
                    call("thread_name_changed", renamed, ThreadId(tid), thread.name)
            try:
                original(thread)
            finally:
                table.ended(tid)
                if destroyed is not None and ctx.active:
                    # run() is over and the thread unregistered: registered again for
                    # this last notification, so current_thread() is still this thread.
                    _register_early(tid, thread)
                    call("thread_destroyed", destroyed, ThreadId(tid))
                    _unregister(tid, thread)

        def set_name(thread: Any, value: str) -> None:
            name_prop.fset(thread, value)
            ident = thread.ident
            if ident is not None and ctx.active:
                table.renamed(ident, str(value))
                if renamed is not None:
                    call("thread_name_changed", renamed, ThreadId(ident), str(value))

        original_bootstrap = _Thread._bootstrap

        def _bootstrap(thread: Any) -> None:
            # The thread's outermost Python frame: register it before it is traced.
            _register_early(_get_ident(), thread)
            original_bootstrap(thread)

        _Thread._bootstrap = _bootstrap
        _Thread._bootstrap_inner = _bootstrap_inner
        _Thread.name = property(name_prop.fget, set_name, None, name_prop.__doc__)
        for thread in threading.enumerate():
            if thread.ident is not None:
                table.seen(thread.ident, thread.name, thread.native_id)

        def undo() -> None:
            _Thread._bootstrap = original_bootstrap
            _Thread._bootstrap_inner = original
            _Thread.name = name_prop

        self._undo.append(undo)

    # -- imports -----------------------------------------------------------------------
    def _install_imports(self) -> None:
        watcher = ImportWatcher(self.ctx)
        sys.meta_path.insert(0, watcher)

        def undo() -> None:
            watcher.active = False
            if watcher in sys.meta_path:
                sys.meta_path.remove(watcher)

        self._undo.append(undo)

    # -- gc --------------------------------------------------------------------------
    def _install_gc(self) -> None:
        ctx = self.ctx
        started = ctx.callback("garbage_collection_started")
        finished = ctx.callback("garbage_collection_finished")
        finished_ex = ctx.callback("garbage_collection_finished_ex")
        call = ctx.call
        began = [0]  # one collection at a time (the interpreter does not nest them)

        def on_gc(phase: str, info: dict[str, int]) -> None:
            if not ctx.active:
                return
            if phase == "start":
                if started is not None:
                    call("garbage_collection_started", started, info["generation"])
                began[0] = _perf_ns()  # after the profiler's own started callback
                return
            took = _perf_ns() - began[0] if began[0] else 0
            began[0] = 0
            counts = (info["generation"], info.get("collected", 0), info.get("uncollectable", 0))
            if finished is not None:
                call("garbage_collection_finished", finished, *counts)
            if finished_ex is not None:
                call("garbage_collection_finished_ex", finished_ex, *counts, took)

        gc.callbacks.append(on_gc)

        def undo() -> None:
            if on_gc in gc.callbacks:
                gc.callbacks.remove(on_gc)

        self._undo.append(undo)


def _register_early(tid: int, thread: Any) -> None:
    """Make ``threading.current_thread()`` on a new thread return its ``Thread`` at once.

    ``Thread._bootstrap_inner`` registers the thread only after running some Python code
    (``_started.set()``) that tracing reports; a profiler calling ``current_thread()`` there,
    or in ``thread_created``, got a made-up ``_DummyThread`` instead, which on 3.13 prints
    "Exception ignored in: _DeleteDummyThreadOnDel.__del__" at interpreter exit. This
    registers it the same way ``_bootstrap_inner`` is about to (a no-op where the private
    names are missing).
    """
    active = getattr(threading, "_active", None)
    lock = getattr(threading, "_active_limbo_lock", None)
    if isinstance(active, dict) and lock is not None:
        with lock:
            active.setdefault(tid, thread)


def _unregister(tid: int, thread: Any) -> None:
    """Undo :func:`_register_early` after the thread's last notification."""
    active = getattr(threading, "_active", None)
    lock = getattr(threading, "_active_limbo_lock", None)
    if isinstance(active, dict) and lock is not None:
        with lock:
            if active.get(tid) is thread:
                del active[tid]


class ImportWatcher:
    """A ``sys.meta_path`` finder that reports module loads and finds nothing itself."""

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self.active = True
        self._started = ctx.callback("module_load_started")
        self._finished = ctx.callback("module_load_finished")
        self._busy = threading.local()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """Ask the finders behind us; report the load if one of them finds the module."""
        if not self.active or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = self._delegate(fullname, path, target)
            if spec is None:
                return None
            filename = spec.origin if spec.has_location else None
            mid = self.ctx.modules.new(fullname, filename)
            if self._started is not None:
                self.ctx.call("module_load_started", self._started, mid)
            loader = spec.loader
            if loader is None or isinstance(loader, type) or not hasattr(loader, "__dict__"):
                self._finish(mid, None)
            else:
                self._wrap(loader, fullname, mid)
            return spec
        finally:
            self._busy.on = False

    def _delegate(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        for finder in list(sys.meta_path):
            if finder is self or isinstance(finder, ImportWatcher):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec: ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _finish(self, mid: ModuleId, error: BaseException | None) -> None:
        if self._finished is not None and self.ctx.active:
            self._busy.on = True
            try:
                self.ctx.call("module_load_finished", self._finished, mid, error)
            finally:
                self._busy.on = False

    def _wrap(self, loader: Any, fullname: str, mid: ModuleId) -> None:
        pending: dict[str, ModuleId] | None = loader.__dict__.get("_profkit_pending")
        if pending is None:
            pending = {}
            original = type(loader).exec_module
            watcher = self

            def exec_module(module: ModuleType) -> None:
                assert pending is not None
                name = module.__name__
                module_id = pending.pop(name, None)
                if not pending:
                    loader.__dict__.pop("exec_module", None)
                    loader.__dict__.pop("_profkit_pending", None)
                error: BaseException | None = None
                try:
                    original(loader, module)
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    if module_id is not None:
                        watcher._finish(module_id, error)

            loader.__dict__["exec_module"] = exec_module
            loader.__dict__["_profkit_pending"] = pending
        pending[fullname] = mid

"""A fake collector for deterministic profiler tests: fake ids, fake FunctionInfo, fake clock.

It plays the role of ``profkit.collect``: it calls ``initialize`` with a :class:`FakeInfo`,
applies the profiler's function filter once per function (rejected functions produce no
events, as on the real backends), and advances a fake clock between events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from profkit.api import EventMask, FunctionInfo, ProfilerCallback, ThreadInfo
from profkit.api.ids import FunctionId, ThreadId


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


class FakeInfo:
    """Just enough of ``ProfilerInfo`` for the profilers under test."""

    backend_name = "fake"

    def __init__(self) -> None:
        self.mask = EventMask.NONE
        self.filter: Callable[[FunctionInfo], bool] | None = None
        self.functions: dict[FunctionId, FunctionInfo] = {}
        self.by_name: dict[str, FunctionId] = {}

    def set_event_mask(self, mask: EventMask) -> None:
        self.mask = mask

    def get_event_mask(self) -> EventMask:
        return self.mask

    def set_function_filter(self, accept: Callable[[FunctionInfo], bool]) -> None:
        self.filter = accept

    def get_function_info(self, function_id: FunctionId) -> FunctionInfo:
        return self.functions[function_id]

    def get_thread_info(self, thread_id: ThreadId) -> ThreadInfo:
        return ThreadInfo(thread_id, f"T{thread_id}", None, True)

    def get_current_thread_id(self) -> ThreadId:
        return ThreadId(1)

    def fid(self, full_name: str, *, generator: bool = False) -> FunctionId:
        """The id of ``module.qualname`` (module = everything before the last dot)."""
        fid = self.by_name.get(full_name)
        if fid is None:
            module, _, name = full_name.rpartition(".")
            fid = FunctionId(100 + len(self.functions))
            self.functions[fid] = FunctionInfo(
                fid, name, module, f"/src/{module.replace('.', '/')}.py", 10, False, generator
            )
            self.by_name[full_name] = fid
        return fid


class FakeDriver:
    """Drives a profiler: ``with d.call("m.f", 5):`` = enter, 5 ns inside, ..., leave."""

    def __init__(self, profiler: ProfilerCallback, clock: FakeClock) -> None:
        self.profiler = profiler
        self.clock = clock
        self.info = FakeInfo()
        profiler.initialize(self.info)  # type: ignore[arg-type]
        self._accepted: dict[FunctionId, bool] = {}

    def hook(self, name: str) -> Callable[[FunctionId], None]:
        """The callback the collector would bind for ``name``: the one the profiler hands
        over in ``call_events`` (asked now: a test may have changed the recorder), else
        its method."""
        given = getattr(self.profiler.call_events(), name, None)
        method: Callable[[FunctionId], None] = getattr(self.profiler, name)
        return given if given is not None else method

    def _shown(self, fid: FunctionId) -> bool:
        ok = self._accepted.get(fid)
        if ok is None:
            flt = self.info.filter
            ok = self._accepted[fid] = flt(self.info.functions[fid]) if flt else True
        return ok

    @contextmanager
    def call(self, name: str, before: int = 0, after: int = 0) -> Iterator[None]:
        """A call: ``before`` ns pass after entry, ``after`` ns before the return."""
        fid = self.info.fid(name)
        shown = self._shown(fid)
        if shown:
            self.hook("function_enter")(fid)
        self.clock.advance(before)
        try:
            yield
        finally:
            self.clock.advance(after)
            if shown:
                self.hook("function_leave")(fid)

    def leaf(self, name: str, duration: int) -> None:
        with self.call(name, duration):
            pass

    def resume(self, name: str) -> None:
        fid = self.info.fid(name, generator=True)
        if self._shown(fid):
            self.hook("function_resume")(fid)

    def yield_(self, name: str) -> None:
        fid = self.info.fid(name, generator=True)
        if self._shown(fid):
            self.hook("function_yield")(fid)

    def enter(self, name: str) -> None:
        fid = self.info.fid(name)
        if self._shown(fid):
            self.hook("function_enter")(fid)

    def leave(self, name: str) -> None:
        fid = self.info.fid(name)
        if self._shown(fid):
            self.hook("function_leave")(fid)

    def sample(self, thread: int, names: list[str], weight: int) -> None:
        fids = tuple(self.info.fid(n) for n in names)
        self.clock.advance(weight)
        self.profiler.stack_sample(ThreadId(thread), fids, self.clock.now, weight)

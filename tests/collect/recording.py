"""Test profilers: a recorder of every notification, and helpers to run code under it."""

from __future__ import annotations

import threading
from typing import Any

from profkit.api import EventMask, ProfilerCallback
from profkit.api.info import ProfilerInfo


class Recorder(ProfilerCallback):
    """Records every notification as a tuple; names instead of ids for readable asserts."""

    def __init__(self, mask: EventMask = EventMask.ENTER_LEAVE, **options: Any) -> None:
        self.mask = mask
        self.options = options
        self.events: list[tuple[Any, ...]] = []
        self.lock = threading.Lock()
        self.info: ProfilerInfo | None = None
        self.shutdowns = 0

    def name(self, fid: int) -> str:
        assert self.info is not None
        return self.info.get_function_info(fid).name  # type: ignore[arg-type]

    def add(self, *event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def initialize(self, info: ProfilerInfo) -> None:
        self.info = info
        info.set_event_mask(self.mask)
        accept = self.options.get("filter")
        if accept is not None:
            info.set_function_filter(accept)

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.add("shutdown")

    def function_first_execution(self, fid: int) -> None:  # type: ignore[override]
        self.add("first", self.name(fid))

    def function_enter(self, fid: int) -> None:  # type: ignore[override]
        self.add("enter", self.name(fid))

    def function_leave(self, fid: int) -> None:  # type: ignore[override]
        self.add("leave", self.name(fid))

    def function_yield(self, fid: int) -> None:  # type: ignore[override]
        self.add("yield", self.name(fid))

    def function_resume(self, fid: int) -> None:  # type: ignore[override]
        self.add("resume", self.name(fid))

    def function_arguments(self, fid: int, arguments: Any) -> None:  # type: ignore[override]
        self.add("args", self.name(fid), dict(arguments))

    def function_return_value(self, fid: int, value: object) -> None:  # type: ignore[override]
        self.add("retval", self.name(fid), value)

    def python_to_native_transition(self, fid: int) -> None:  # type: ignore[override]
        self.add("to_native", self.name(fid))

    def native_to_python_transition(self, fid: int) -> None:  # type: ignore[override]
        self.add("to_python", self.name(fid))

    def exception_thrown(self, fid: int, exc: BaseException) -> None:  # type: ignore[override]
        self.add("thrown", self.name(fid), type(exc).__name__)

    def exception_unwind_function_leave(self, fid: int) -> None:  # type: ignore[override]
        self.add("unwind", self.name(fid))

    def exception_caught(self, fid: int, exc: BaseException) -> None:  # type: ignore[override]
        self.add("caught", self.name(fid), type(exc).__name__)

    def exception_reraised(self, fid: int, exc: BaseException) -> None:  # type: ignore[override]
        self.add("reraised", self.name(fid), type(exc).__name__)

    def thread_created(self, tid: int) -> None:  # type: ignore[override]
        self.add("thread_created", tid)

    def thread_destroyed(self, tid: int) -> None:  # type: ignore[override]
        self.add("thread_destroyed", tid)

    def thread_name_changed(self, tid: int, name: str) -> None:  # type: ignore[override]
        self.add("thread_name", tid, name)

    def module_load_started(self, mid: int) -> None:  # type: ignore[override]
        assert self.info is not None
        self.add("module_started", self.info.get_module_info(mid).name)  # type: ignore[arg-type]

    def module_load_finished(self, mid: int, error: BaseException | None) -> None:  # type: ignore[override]
        assert self.info is not None
        info = self.info.get_module_info(mid)  # type: ignore[arg-type]
        self.add(
            "module_finished", info.name, info.filename, type(error).__name__ if error else None
        )

    def garbage_collection_started(self, generation: int) -> None:
        self.add("gc_started", generation)

    def garbage_collection_finished(
        self, generation: int, collected: int, uncollectable: int
    ) -> None:
        self.add("gc_finished", generation, collected, uncollectable)

    def stack_sample(
        self, thread_id: Any, function_ids: Any, timestamp_ns: int, weight_ns: int
    ) -> None:
        self.add("sample", thread_id, tuple(self.name(f) for f in function_ids), weight_ns)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        """Events of one kind."""
        with self.lock:
            return [e for e in self.events if e[0] == kind]

    def calls(self, names: set[str]) -> list[tuple[Any, ...]]:
        """Enter/leave/yield/resume/unwind events of the named functions, in order."""
        kinds = {"enter", "leave", "yield", "resume", "unwind"}
        with self.lock:
            return [e for e in self.events if e[0] in kinds and e[1] in names]

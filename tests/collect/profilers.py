"""Profilers loaded by the start-up hook in child processes (``PROFKIT_PROFILER=...``)."""

from __future__ import annotations

import json
import os
from typing import Any

from profkit.api import EventMask, ProfilerCallback


class FileRecorder(ProfilerCallback):
    """Counts enters; at shutdown writes ``$PROFKIT_TEST_OUT/<pid>.json``."""

    def initialize(self, info: Any) -> None:
        self.info = info
        self.entered: dict[int, int] = {}
        self.threads = 0
        if os.environ.get("PROFKIT_BACKEND") == "sampler":
            info.set_event_mask(EventMask.SAMPLING | EventMask.THREADS)
        else:
            info.set_event_mask(EventMask.ENTER_LEAVE | EventMask.THREADS)

    def stack_sample(
        self, thread_id: Any, function_ids: Any, timestamp_ns: int, weight_ns: int
    ) -> None:
        for fid in function_ids:
            self.entered[fid] = self.entered.get(fid, 0) + 1

    def function_enter(self, function_id: Any) -> None:
        self.entered[function_id] = self.entered.get(function_id, 0) + 1

    def thread_created(self, thread_id: Any) -> None:
        self.threads += 1

    def shutdown(self) -> None:
        out = os.environ.get("PROFKIT_TEST_OUT")
        if not out:
            return
        names = sorted({self.info.get_function_info(f).name for f in self.entered})
        record = {
            "pid": os.getpid(),
            "backend": self.info.backend_name,
            "enters": sum(self.entered.values()),
            "names": names,
            "threads": self.threads,
        }
        with open(os.path.join(out, f"{os.getpid()}.json"), "w") as fh:
            json.dump(record, fh)


class RaisesInEnter(FileRecorder):
    """Fails in the first function_enter."""

    def function_enter(self, function_id: Any) -> None:
        raise ValueError("kaput")


class RaisesInInitialize(ProfilerCallback):
    """Fails before any event."""

    def initialize(self, info: Any) -> None:
        raise RuntimeError("cannot start")

"""Sample mode's callback: stacks from the collector's sampler → per-thread trees.

Each sample adds its weight to every shown frame on its path (the leaf's self time is
derived when the profile is built); functions are accepted or not once, by the same
capture filter as trace mode.
"""

from __future__ import annotations

from collections.abc import Callable

from profkit.api import FunctionInfo, ProfilerInfo
from profkit.api.ids import FunctionId, ThreadId
from profkit.profilers.elt.tree import Node


class SampledTrees:
    """Sample mode's recorder: one tree per sampled thread, held by the profiler (which
    checks its pause before handing a sample on)."""

    def __init__(self, info: ProfilerInfo, accepts: Callable[[FunctionInfo], bool]) -> None:
        self._info = info
        self._accepts = accepts
        #: thread → (name, native id, root of its sampled tree)
        self.trees: dict[ThreadId, tuple[str, int | None, Node]] = {}
        self._accepted: dict[FunctionId, bool] = {}

    def add(
        self, thread_id: ThreadId, function_ids: tuple[FunctionId, ...], weight_ns: int
    ) -> None:
        """Add one sample: every shown frame on the path gets the weight (the leaf's self
        time follows: ``convert`` derives it from the children's)."""
        entry = self.trees.get(thread_id)
        if entry is None:
            entry = self.trees[thread_id] = (*self._thread_names(thread_id), Node(None))
        node = entry[2]
        node.incl += weight_ns
        accepted = self._accepted
        for fid in function_ids:
            try:
                if not accepted[fid]:
                    continue
            except KeyError:
                if not self._accept_id(fid):
                    continue
            try:
                node = node.children[fid]
            except KeyError:
                node = node.child(fid)
            node.calls += 1
            node.incl += weight_ns

    def _accept_id(self, fid: FunctionId) -> bool:
        ok = self._accepted[fid] = self._accepts(self._info.get_function_info(fid))
        return ok

    def _thread_names(self, thread_id: ThreadId) -> tuple[str, int | None]:
        """The sampled thread's name and OS thread id, as the collector knows them (the
        sampler runs on a thread of its own: only the collector saw the thread start)."""
        try:
            info = self._info.get_thread_info(thread_id)
        except Exception:
            return f"Thread-{thread_id}", None
        return info.name, info.native_id

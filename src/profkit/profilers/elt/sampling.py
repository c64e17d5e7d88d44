"""Sample mode's callback: stacks from the collector's sampler → per-thread trees.

Each sample adds its weight to every shown frame on its path (the leaf's self time is
derived when the profile is built); functions are accepted or not once, by the same
capture filter as trace mode.
"""

from __future__ import annotations

from profkit.api import FunctionInfo, ProfilerInfo
from profkit.api.ids import FunctionId, ThreadId
from profkit.profilers.elt.tree import Node


class SampleHooks:
    """Mixin with ``stack_sample``; :class:`EltProfiler` provides the state."""

    _paused: bool
    _info: ProfilerInfo | None
    #: thread → (name, native id, root of its sampled tree)
    _samples: dict[ThreadId, tuple[str, int | None, Node]]
    _accepted: dict[FunctionId, bool]

    def accepts(self, info: FunctionInfo) -> bool:  # provided by the profiler
        raise NotImplementedError

    def _function_info(self, function_id: FunctionId) -> FunctionInfo:
        raise NotImplementedError

    # -- sample mode ------------------------------------------------------------------
    def stack_sample(
        self,
        thread_id: ThreadId,
        function_ids: tuple[FunctionId, ...],
        timestamp_ns: int,
        weight_ns: int,
    ) -> None:
        """Add one sample: every shown frame on the path gets the weight (the leaf's self
        time follows: ``convert`` derives it from the children's)."""
        if self._paused:
            return
        entry = self._samples.get(thread_id)
        if entry is None:
            entry = self._samples[thread_id] = (*self._thread_names(thread_id), Node(None))
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
        ok = self._accepted[fid] = self.accepts(self._function_info(fid))
        return ok

    def _thread_names(self, thread_id: ThreadId) -> tuple[str, int | None]:
        """The sampled thread's name and OS thread id, as the collector knows them (the
        sampler runs on a thread of its own: only the collector saw the thread start)."""
        try:
            assert self._info is not None
            info = self._info.get_thread_info(thread_id)
        except Exception:
            return f"Thread-{thread_id}", None
        return info.name, info.native_id

"""From allocation events to a memory profile: bytes by stack, three ways.

* **allocated**: every byte allocated while sampling ran, freed or not (the estimate: the sum of
  sample weights), by the stack that allocated it;
* **peak**: the bytes alive at the moment the estimated live total was highest, by stack, and
  that total (``peak_bytes``);
* **leaked**: the bytes still alive when sampling stopped (leak candidates), by stack.

With :class:`~profkit.heap.sampler.Strata` (the hooks' exact bytes by size class), each
sample's weight is scaled so that every size class's samples add up to its exact bytes, in all
three views alike (docs/heap.md, "Post-stratification"); bytes of a class no sample fell in go
to an :data:`UNATTRIBUTED` site of the allocated view.

Events are few (one per ``mean_bytes`` allocated, on average), so the profile is built in two
passes over them at the end rather than by keeping snapshots while the program runs: the first
pass finds the event at which the live estimate peaks, the second replays up to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import CodeType

from profkit._record import field, record
from profkit.api.names import module_of
from profkit.calltree.model import LogEntry, replay
from profkit.heap.sampler import Allocation, Event, StackFrame, Strata

#: A stack as reports show it: outermost frame first, each frame a display name.
NamedStack = tuple[str, ...]

#: The site of bytes in a size class where no allocation was sampled: counted (the class's
#: total is exact) but with no stack to give them to.
UNATTRIBUTED = "[unattributed]"


@record
class MemoryProfile:
    """Estimated bytes by stack (outermost first) for the three metrics, and the totals."""

    allocated: dict[NamedStack, float] = field(default_factory=dict)
    peak: dict[NamedStack, float] = field(default_factory=dict)
    leaked: dict[NamedStack, float] = field(default_factory=dict)
    allocated_bytes: float = 0.0
    peak_bytes: float = 0.0
    leaked_bytes: float = 0.0
    samples: int = 0
    #: the exact tallies the weights were scaled to (None: weights as sampled)
    strata: Strata | None = None
    #: allocated bytes of size classes with no sample (in ``allocated`` under UNATTRIBUTED)
    unattributed_bytes: float = 0.0

    def metric(self, name: str) -> dict[NamedStack, float]:
        """``alloc``, ``peak`` or ``leaked``: the table reports and exports weigh by."""
        tables = {"alloc": self.allocated, "peak": self.peak, "leaked": self.leaked}
        if name not in tables:
            raise ValueError(f"unknown memory metric {name!r} (alloc, peak, leaked)")
        return tables[name]

    def by_function(self, name: str = "alloc") -> dict[str, float]:
        """Self bytes per innermost function: who called the allocator."""
        out: dict[str, float] = {}
        for stack, weight in self.metric(name).items():
            leaf = stack[-1] if stack else "<no Python frame>"
            out[leaf] = out.get(leaf, 0.0) + weight
        return out


def frame_name(code: CodeType, line: int) -> str:
    """``module.qualname`` as the rest of profkit names functions (the line is not part of
    the name, so one function's allocations add up in one node)."""
    module = module_of(code.co_filename)
    return f"{module}.{code.co_qualname}" if module else code.co_qualname


def build_profile(
    events: Iterable[Event],
    name: Callable[[CodeType, int], str] = frame_name,
    strata: Strata | None = None,
) -> MemoryProfile:
    """Aggregate events (as :meth:`AllocationSampler.drain` returns them, in order).

    ``strata`` (:func:`~profkit.heap.sampler.allocation_strata`, taken after the last drain)
    scales each sample's weight to its size class's exact total; the events must then be all
    the samples those strata count (one session's, every drain), else the scaling is off."""
    factors = strata.factors() if strata is not None else {}
    names: dict[tuple[StackFrame, ...], NamedStack] = {}

    def named(stack: tuple[StackFrame, ...]) -> NamedStack:
        found = names.get(stack)
        if found is None:
            found = names[stack] = tuple(name(code, line) for code, line in reversed(stack))
        return found

    def scaled(e: Allocation) -> float:
        if strata is None:
            return e.weight
        return e.weight * factors.get(strata.key(e.size), 1.0)

    log: list[LogEntry[NamedStack]] = [
        (e.id, scaled(e), named(e.stack)) if isinstance(e, Allocation) else (e.id, None, None)
        for e in events
    ]
    done = replay(log)
    profile = MemoryProfile(
        allocated_bytes=done.allocated_bytes,
        peak_bytes=done.peak_bytes,
        samples=sum(int(n) for n, _ in done.allocated.values()),
    )
    profile.allocated = {key: w for key, (_n, w) in done.allocated.items()}
    if strata is not None:
        profile.strata = strata
        profile.unattributed_bytes = float(strata.unattributed_bytes)
        if profile.unattributed_bytes:
            profile.allocated[(UNATTRIBUTED,)] = profile.unattributed_bytes
            profile.allocated_bytes += profile.unattributed_bytes
    for table, blocks in ((profile.peak, done.at_peak), (profile.leaked, done.leaked)):
        for weight, key in blocks.values():
            table[key] = table.get(key, 0.0) + weight
    profile.leaked_bytes = sum(profile.leaked.values())
    return profile

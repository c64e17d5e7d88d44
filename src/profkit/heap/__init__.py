"""The heap half of the profiling API: sampled allocations, frees and memory profiles.

After the CLR Profiling API's ``ObjectAllocated`` (its own event-mask bit, off by default for
cost) and the ObjectID lifetime rule: :class:`AllocationSampler` reports a byte-weighted sample
of the interpreter's allocations and the end of each sampled block's life;
:func:`build_profile` turns those events into bytes by stack (allocated, alive at the peak,
alive at the end). See ``docs/api.md`` (heap) for how totals are scaled.
"""

from profkit.heap.profile import MemoryProfile, NamedStack, build_profile, frame_name
from profkit.heap.sampler import (
    DEFAULT_MEAN_BYTES,
    Allocation,
    AllocationSampler,
    Event,
    Free,
    native_available,
)

__all__ = [
    "DEFAULT_MEAN_BYTES",
    "Allocation",
    "AllocationSampler",
    "Event",
    "Free",
    "MemoryProfile",
    "NamedStack",
    "build_profile",
    "frame_name",
    "native_available",
]

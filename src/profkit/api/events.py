"""The event mask: which notification categories a profiler receives.

After ``COR_PRF_MONITOR``: a profiler sets the mask in ``initialize`` with
:meth:`ProfilerInfo.set_event_mask`; bits in :data:`IMMUTABLE` can be set only there, because
turning them on later would need the process to have been prepared from the start (a
sampler thread, argument capture, native-call instrumentation). Mutable bits can be
flipped at any time, and the collector re-arms its hooks accordingly.
"""

from __future__ import annotations

import enum


class EventMask(enum.IntFlag):
    """Notification categories (``COR_PRF_MONITOR_*`` analogues)."""

    NONE = 0
    #: function_enter / function_leave / function_yield / function_resume (``ENTERLEAVE``).
    ENTER_LEAVE = 1 << 0
    #: function_first_execution, where a function id is born (``JIT_COMPILATION``).
    FIRST_EXECUTION = 1 << 1
    #: python_to_native_transition / native_to_python_transition around C calls
    #: (``CODE_TRANSITIONS``). Immutable.
    CODE_TRANSITIONS = 1 << 2
    #: exception_thrown / exception_unwind_function_leave / exception_caught /
    #: exception_reraised (``EXCEPTIONS``).
    EXCEPTIONS = 1 << 3
    #: thread_created / thread_destroyed / thread_name_changed (``THREADS``).
    THREADS = 1 << 4
    #: module_load_started / module_load_finished (``MODULE_LOADS``).
    MODULE_LOADS = 1 << 5
    #: garbage_collection_started / garbage_collection_finished (``GC``).
    GC = 1 << 6
    #: function_arguments right after function_enter (``ENABLE_FUNCTION_ARGS``). Immutable.
    FUNCTION_ARGS = 1 << 7
    #: function_return_value right before function_leave (``ENABLE_FUNCTION_RETVAL``). Immutable.
    FUNCTION_RETVAL = 1 << 8
    #: allow ProfilerInfo.do_stack_snapshot (``ENABLE_STACK_SNAPSHOT``).
    ENABLE_STACK_SNAPSHOT = 1 << 9
    #: profkit keeps a per-thread shadow stack readable with ProfilerInfo.get_shadow_stack.
    ENABLE_SHADOW_STACK = 1 << 10
    #: a sampler thread delivers stack_sample notifications. Immutable.
    SAMPLING = 1 << 11
    #: object_allocated / object_freed for a byte-weighted sample of allocations
    #: (``OBJECT_ALLOCATED``; off by default for its cost, as the CLR's). Immutable.
    OBJECT_ALLOCATED = 1 << 12

    #: Bits that only ``initialize`` may set (``COR_PRF_MONITOR_IMMUTABLE``).
    IMMUTABLE = CODE_TRANSITIONS | FUNCTION_ARGS | FUNCTION_RETVAL | SAMPLING | OBJECT_ALLOCATED

    #: Everything a tracing profiler usually wants.
    ALL_TRACING = (
        ENTER_LEAVE
        | FIRST_EXECUTION
        | CODE_TRANSITIONS
        | EXCEPTIONS
        | THREADS
        | MODULE_LOADS
        | GC
        | ENABLE_STACK_SNAPSHOT
        | ENABLE_SHADOW_STACK
    )


IMMUTABLE = EventMask.IMMUTABLE

"""Opaque ids handed to profilers, and how long each one stays valid.

Ids are plain ints so they are cheap to pass on every event and to use as dict keys.
They are *opaque*: a profiler must not derive meaning from the value, only compare it
and pass it back to :class:`~profkit.api.ProfilerInfo` to ask about it.

=================  ==========================================  =================================
id                 born                                        valid until
=================  ==========================================  =================================
``FunctionId``     first execution of a code object            profiler detach / process end
                   (``function_first_execution``), or first    (code objects that die are not
                   call of a C function (transitions)          reused: the id is never recycled)
``ModuleId``       ``module_load_started``                     process end (a module removed from
                                                               ``sys.modules`` keeps its id)
``ThreadId``       ``thread_created`` (or first event seen     ``thread_destroyed``; the value may
                   on a thread that predates the profiler)     be reused afterwards, as OS ids are
=================  ==========================================  =================================
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import NewType
else:

    def NewType(name: str, tp: type) -> object:
        """typing.NewType as it is at run time: the value itself."""
        return lambda value: value


FunctionId = NewType("FunctionId", int)
ModuleId = NewType("ModuleId", int)
ThreadId = NewType("ThreadId", int)
#: A sampled allocation: born with object_allocated, dead after object_freed. A sample number,
#: not an address: never reused within a process (Python never moves objects, so nothing
#: like the CLR's MovedReferences can change it during its life).
ObjectId = NewType("ObjectId", int)

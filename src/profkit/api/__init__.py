"""The profiling API for Python programs, after the .NET CLR Profiling API.

A profiler subclasses :class:`ProfilerCallback`, selects notifications with an
:class:`EventMask` in ``initialize(info)``, and asks :class:`ProfilerInfo` about the ids it
receives. See ``docs/api.md``.
"""

from profkit.api.callback import CallEvents, ProfilerCallback
from profkit.api.errors import (
    ImmutableFlagError,
    NotAvailableError,
    ProfilerApiError,
    UnknownIdError,
    UnsupportedEventError,
)
from profkit.api.events import IMMUTABLE, EventMask
from profkit.api.ids import FunctionId, ModuleId, ObjectId, ThreadId
from profkit.api.info import FunctionInfo, ModuleInfo, ProfilerInfo, ThreadInfo

__all__ = [
    "IMMUTABLE",
    "CallEvents",
    "EventMask",
    "FunctionId",
    "FunctionInfo",
    "ImmutableFlagError",
    "ModuleId",
    "ModuleInfo",
    "NotAvailableError",
    "ObjectId",
    "ProfilerApiError",
    "ProfilerCallback",
    "ProfilerInfo",
    "ThreadId",
    "ThreadInfo",
    "UnknownIdError",
    "UnsupportedEventError",
]

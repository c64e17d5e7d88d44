"""Small helpers shared by the tracing backends: native callables and argument capture."""

from __future__ import annotations

import types
from collections.abc import Mapping
from types import FrameType

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: Callables that run C code: calling one is a python→native transition.
NATIVE_TYPES: frozenset[type] = frozenset(
    {
        types.BuiltinFunctionType,  # builtin_function_or_method (also bound C methods)
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        types.MethodWrapperType,
        types.ClassMethodDescriptorType,
    }
)


def arguments_of(frame: FrameType) -> Mapping[str, object]:
    """The arguments of the call that just started in ``frame`` (FUNCTION_ARGS).

    Read from ``f_locals`` at entry, before the body can rebind them; a snapshot dict so
    the profiler cannot mutate the frame.
    """
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    flags = code.co_flags
    if flags & 0x04:  # *args
        count += 1
    if flags & 0x08:  # **kwargs
        count += 1
    names = code.co_varnames[:count]
    local: Any = frame.f_locals
    return {name: local[name] for name in names if name in local}

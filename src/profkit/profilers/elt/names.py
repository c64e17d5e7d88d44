"""How the ELT profilers name functions, and which code is profkit's own.

Shared by trace and sample mode and the memory profiler: one rule for ``module.qualname``
(frozen stdlib code by its module, a ``-m`` main module by its real name) and one list of
the modules and files that are profkit's machinery, never shown.
"""

from __future__ import annotations

from profkit.api import FunctionInfo
from profkit.api.names import INTERNAL_MODULES, PROFKIT_MAIN, function_module

__all__ = ["INTERNAL_MODULES", "PROFKIT_MAIN", "full_name", "module_of"]


def module_of(info: FunctionInfo, main_module: tuple[str, str] | None = None) -> str:
    """The module a function's name and the prefix filter use
    (:func:`profkit.api.names.function_module`: frozen code by its module, a ``-m`` main
    module by its real name)."""
    return function_module(info.filename, info.module, main_module)


def full_name(info: FunctionInfo, main_module: tuple[str, str] | None = None) -> str:
    """``module.qualname`` as reports show it (see :func:`module_of`)."""
    module = function_module(info.filename, info.module, main_module)  # module_of's, inlined
    return f"{module}.{info.name}" if module else info.name

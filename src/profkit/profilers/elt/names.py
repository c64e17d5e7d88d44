"""How the ELT profilers name functions, and which code is profkit's own.

Shared by trace and sample mode and the memory profiler: one rule for ``module.qualname``
(frozen stdlib code by its module, a ``-m`` main module by its real name) and one list of
the modules and files that are profkit's machinery, never shown.
"""

from __future__ import annotations

import os

from profkit.api import FunctionInfo
from profkit.api.names import LAUNCHER_MODULES, PROFKIT_MODULES

#: profkit's own machinery, never shown (it runs the program; it is not the program).
INTERNAL_MODULES = LAUNCHER_MODULES + PROFKIT_MODULES

#: ``python -m profkit``'s entry file: its ``<module>`` is named ``__main__`` by the collector,
#: so no module prefix can hide it (the stack sampler sees it under the program).
PROFKIT_MAIN = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "__main__.py"
)


def module_of(info: FunctionInfo, main_module: tuple[str, str] | None = None) -> str:
    """The module a function's name and the prefix filter use.

    Frozen stdlib code (``<frozen runpy>``) is named by its module (Python 3.11+ freezes
    start-up modules such as ``runpy`` and ``importlib._bootstrap``). ``main_module`` is
    ``(file, name)`` of a module run as ``__main__`` by ``-m``: its functions are named
    after the module (``myapp.cli``), so ``--prefix myapp`` keeps them.
    """
    filename = info.filename
    if main_module is not None and filename == main_module[0]:
        return main_module[1]
    if filename.startswith("<frozen ") and filename.endswith(">"):
        return filename[8:-1]
    return info.module


def full_name(info: FunctionInfo, main_module: tuple[str, str] | None = None) -> str:
    """``module.qualname`` as reports show it (see :func:`module_of`)."""
    module = module_of(info, main_module)
    return f"{module}.{info.name}" if module else info.name

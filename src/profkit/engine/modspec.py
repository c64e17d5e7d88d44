"""Where ``python -m NAME`` would find NAME, learnt without running any of its packages.

Why: ``importlib.util.find_spec("pkg.mod")`` imports ``pkg`` first, which runs
``pkg/__init__.py``. Done by profkit before recording, that is the program's own code run
where the profile does not see it (``profkit run -m pytest`` lost pytest's whole import),
and, where the program then runs in a child (sample mode), run twice: a print in the
package's ``__init__`` came out twice. ``python -m`` itself imports the packages as part
of the run (runpy), and so do cProfile and py-spy's views of it.

So the packages' directories are followed the way the path-based finder follows them,
from the top-level package's spec (which is found without running anything). A package
that changes its own ``__path__`` when it runs, or a submodule only a meta-path finder
knows, is rare; the runner checks the first after the package ran
(:func:`found_in`), and for the second this gives None and the caller falls back
to the importing search.
"""

from __future__ import annotations

import importlib.machinery  # (python.py's start-up has it; importlib.util is lazy)
import os
import sys


def spec_without_running(name: str) -> importlib.machinery.ModuleSpec | None:
    """NAME's spec as the import system would find it, running no package's code; None
    when that cannot be known without running some (the caller then imports).

    Raises what :func:`importlib.util.find_spec` raises for a top-level name (a bad name,
    ``ValueError``)."""
    import importlib.util  # -m only

    parts = name.split(".")
    if not all(parts):
        return None  # ".x", "x..y": the importing search gives python's error
    spec = importlib.util.find_spec(parts[0])  # a top-level search runs no package code
    for depth in range(1, len(parts)):
        if spec is None or spec.submodule_search_locations is None:
            return None  # not a package: the importing search says why, in python's words
        package = ".".join(parts[:depth])
        module = sys.modules.get(package)
        locations = getattr(module, "__path__", None) if module is not None else None
        path = list(locations if locations is not None else spec.submodule_search_locations)
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), path)
    return spec


def pending_package(spec: importlib.machinery.ModuleSpec) -> str | None:
    """The package ``python -m`` imports (runs) before ``spec``'s module, when it is not
    imported yet: runpy's ``__import__(spec.parent)``. None for a top-level module."""
    return spec.parent if spec.parent and spec.parent not in sys.modules else None


def found_in(spec: importlib.machinery.ModuleSpec) -> str | None:
    """The directory of its package's ``__path__`` the module was found in (None: not
    a file): once the package has run, still in its ``__path__`` unless the package
    rewrote it, a test the runner makes with no call (a call would be recorded)."""
    if spec.origin is None or not spec.has_location:
        return None
    here = os.path.dirname(spec.origin)
    return os.path.dirname(here) if spec.submodule_search_locations is not None else here

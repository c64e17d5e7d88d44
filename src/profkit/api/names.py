"""The naming rules every layer shares: which module a function is in, what is profkit's
own code, and how a namespace prefix is written and matched.

Each used to exist in several copies (the settings and the report parsing prefixes, the
collector, the ELT and memory profilers and the report listing profkit's own modules, the
collector and the heap naming a file's module), some with slightly different rules. They
live here, in the API package, because profilers may import only :mod:`profkit.api` and
the call-tree model, and a user's profiler filtering by ``PROFKIT_NAMESPACE_PREFIX`` needs
the same rule ours uses. (The out-of-process sampler names modules from the files on disk,
:mod:`profkit.sampler.naming`; its frozen-module rule is :func:`frozen_module`'s.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from itertools import islice

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: profkit's own machinery: it runs, records or saves the program; it is never the
#: program. Module paths, matched with :func:`prefix_matches`. ``profkit.demo`` is not
#: here on purpose: it is a program users profile.
PROFKIT_MODULES: tuple[str, ...] = (
    "profkit.api",
    "profkit.calltree",
    "profkit.cli",
    "profkit.collect",
    "profkit.errors",
    "profkit.monitor",
    "profkit.profilers",
    "profkit.report",
    "profkit.runner",
    "profkit.settings",
    "profkit.wire",
    "profkit._atomic",
)

#: Launcher code that ``python`` itself runs before the program (``python -m``'s
#: ``runpy``): hidden like profkit's own, since under ``profkit run`` it is ours to run.
LAUNCHER_MODULES: tuple[str, ...] = ("runpy",)

#: Every module never shown (profkit's machinery and the launcher), for :func:`prefix_matches`.
INTERNAL_MODULES: tuple[str, ...] = LAUNCHER_MODULES + PROFKIT_MODULES

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../profkit

#: ``python -m profkit``'s entry file: its ``<module>`` is named ``__main__``, so no module
#: prefix can hide it (a stack sampler sees it under the program).
PROFKIT_MAIN = os.path.join(_PACKAGE, "__main__.py")

#: The directories of the code that runs on every profiled event (the collector, the API
#: dispatch, the profilers): never profiled, or profiling would record itself.
OWN_CODE_DIRS: tuple[str, ...] = tuple(
    f"{_PACKAGE}/{sub}/" for sub in ("collect", "api", "profilers")
)

#: A module path: dotted identifiers (``myapp``, ``myapp.core``).
MODULE_PATH = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"


def is_own_code(filename: str) -> bool:
    """Whether code from ``filename`` is profkit's per-event machinery (see
    :data:`OWN_CODE_DIRS`)."""
    return filename.startswith(OWN_CODE_DIRS)


#: What a prefix list trims around each part: ASCII whitespace (the .NET profiler trims the same).
_BLANKS = " \t\n\r\f\v"


def split_prefixes(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"myapp, lib.core"`` (or a list of them) -> ``("myapp", "lib.core")``, blanks
    dropped; empty means no filter. (The settings check each is a :data:`MODULE_PATH`; a
    report also forgives a trailing dot.)"""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    # ASCII blanks only, as the .NET profiler trims (clr/csrc/settings.c parse_prefixes)
    return tuple(p.strip(_BLANKS) for p in items if p.strip(_BLANKS))


def is_module_path(text: str) -> bool:
    """Whether ``text`` is a dotted module path (what a prefix must be)."""
    import re  # not a cost of every start-up: prefixes are rare

    return re.match(MODULE_PATH, text) is not None


def prefix_matches(module: str, prefixes: tuple[str, ...]) -> bool:
    """True when ``module`` is one of ``prefixes`` or inside one (module-path boundaries).

    ``myapp`` matches ``myapp`` and ``myapp.core`` but not ``myapplication``.
    """
    for prefix in prefixes:
        if module == prefix or (module.startswith(prefix) and module[len(prefix)] == "."):
            return True
    return False


def prefix_test(prefixes: tuple[str, ...]) -> Callable[[str], bool]:
    """:func:`prefix_matches` for one fixed set of prefixes, as one or two C calls a name
    (``name in {...}`` or ``name.startswith((p + ".", ...))``): the same rule, for passes
    that test thousands of names against the same prefixes (the end-of-run tree's views,
    issue #26), where the Python loop above cost ~10 M instructions a pass."""
    exact = frozenset(prefixes)
    below = tuple(p + "." for p in prefixes)

    def test(module: str) -> bool:
        return module in exact or module.startswith(below)

    return test


def is_profkit_module(module: str) -> bool:
    """Whether ``module`` is profkit's own machinery or the launcher's (never shown)."""
    return prefix_matches(module, PROFKIT_MODULES) or prefix_matches(module, LAUNCHER_MODULES)


#: profkit's modules that are a program, not profkit: users profile the demo.
PROGRAM_MODULES: tuple[str, ...] = ("profkit.demo",)


def is_profkit_package(module: str) -> bool:
    """Whether ``module`` is any part of profkit itself (not only the machinery of
    :data:`PROFKIT_MODULES`: its CLI, heap walk and exports too), the demo aside.

    What a census of the heap leaves out: under ``profkit heap run`` profkit's own modules
    share the process with the program, and their docstrings, code and tables are not the
    program's memory.
    """
    return prefix_matches(module, ("profkit",)) and not prefix_matches(module, PROGRAM_MODULES)


def frozen_module(filename: str) -> str | None:
    """The module of frozen stdlib code (``<frozen runpy>`` -> ``runpy``: 3.11+ freezes
    start-up modules such as ``runpy`` and ``importlib._bootstrap``), else None."""
    if filename.startswith("<frozen ") and filename.endswith(">"):
        return filename[8:-1]
    return None


def function_module(filename: str, module: str, main_module: tuple[str, str] | None) -> str:
    """The module a function's name and the prefix filter use, given the collector's
    ``module`` for its file: frozen code by its module; ``main_module`` is ``(file, name)``
    of a module run as ``__main__`` by ``-m``, whose functions are named after the module
    (``myapp.cli``), so ``--prefix myapp`` keeps them."""
    if main_module is not None and filename == main_module[0]:
        return main_module[1]
    if not filename.startswith("<frozen "):  # most files: no call more (the end of a run
        return module  # names every function, ~5,000 on sympy)
    frozen = frozen_module(filename)
    return module if frozen is None else frozen


def module_of(filename: str) -> str:
    """The module name a source file is imported as, matched against ``sys.modules``.

    Slow path (once per function): ``sys.modules`` is scanned again only when it has
    grown since the last scan, and then only the modules imported since (see
    :func:`_scan_new_modules`), so a miss costs one ``len``.
    """
    name = _MODULE_BY_FILE.get(filename)
    if name is None and len(sys.modules) != _SCANNED[0]:
        _scan_new_modules(sys.modules)
        name = _MODULE_BY_FILE.get(filename)
    if name is None:
        name = _by_import_path(filename, sys.modules, sys.path)
    if name is None:
        # runpy *replaces* sys.modules["__main__"] when a script starts: the length stays
        # the same, so the rescan above cannot notice; ask __main__ directly.
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if main_file == filename:
            return "__main__"
        frozen = frozen_module(filename)  # "<frozen importlib._bootstrap>"
        if frozen is not None:
            return frozen
        if filename.startswith("<"):
            # "<string>" is python -c, but also code made by exec() in any module
            # (dataclass and namedtuple methods): the module is not knowable from the code.
            return ""
        base = filename.rsplit("/", 1)[-1]
        return base[:-3] if base.endswith(".py") else base
    return name


def _by_import_path(filename: str, modules: dict[str, Any], path: list[str]) -> str | None:
    """The module ``filename`` is, by its place under a ``sys.path`` entry, if
    ``sys.modules`` holds it under that name with that file (then it is recorded).

    Why: the incremental scan can miss a module. It walks back from the newest entry of
    ``sys.modules`` to one it has seen, and an entry put back at the end (removed and
    re-added, same object) after other changes ends the walk before the new modules
    (seen on sympy in memory mode, whose functions are named late, at a sampled
    allocation: ``dotproduct.DotProduct`` for ``sympy.matrices.expressions.dotproduct``).
    A guess from the path alone is not enough: the same file can be imported under
    another name, or not at all (``exec``), so only a name ``sys.modules`` confirms counts.
    """
    for entry in path:
        root = (entry or ".").rstrip("/") + "/"
        if not filename.startswith(root) or not filename.endswith(".py"):
            continue
        parts = filename[len(root) : -3].split("/")
        if parts[-1] == "__init__":
            parts.pop()
        if not parts or not all(p.isidentifier() for p in parts):
            continue
        candidate = ".".join(parts)
        module = modules.get(candidate)
        if module is not None and getattr(module, "__file__", None) == filename:
            _MODULE_BY_FILE.setdefault(filename, candidate)
            return candidate
    return None


def _scan_new_modules(modules: dict[str, Any]) -> None:
    """Record the files of the modules imported since the last scan.

    Why not rescan everything: the first code object seen after an import is the new
    module's body, so during a program's start-up (sympy: 500 imports) nearly every import
    made a full pass over ``sys.modules``, O(modules²) in all, ~1 s on sympy, charged to
    ``builtins.exec`` (the caller of each module body). ``sys.modules`` keeps insertion
    order and an import appends, so the new modules are its tail: only the tail is read
    (copying all of a large ``sys.modules`` costs ~0.1 ms), back to the first module
    already recorded, and the new ones are recorded oldest first (so a file imported under
    two names keeps its first name, as before).
    """
    size = len(modules)
    grown = size - _SCANNED[0]
    _SCANNED[0] = size
    window = max(grown, 0) + 8
    while True:
        try:  # read in C, but a collection it triggers may run a finalizer that imports
            tail = list(islice(reversed(modules.items()), window))
        except RuntimeError:  # sys.modules changed size while being read: read again
            continue
        # A recorded module ends the walk only past as many entries as were added: one
        # removed and put back (moved to the end) must not hide the imports before it.
        stop = next(
            (
                i
                for i, (modname, mod) in enumerate(tail)
                if i >= grown and _SCANNED_MODULES.get(modname) == id(mod)
            ),
            None,
        )
        if stop is not None or len(tail) < window:
            break
        window *= 4
    for modname, mod in reversed(tail[:stop]):
        _SCANNED_MODULES[modname] = id(mod)
        path = getattr(mod, "__file__", None)
        if isinstance(path, str):
            _MODULE_BY_FILE.setdefault(path, modname)


_MODULE_BY_FILE: dict[str, str] = {}
#: name → id of the module object recorded under it (the scan's stopping point)
_SCANNED_MODULES: dict[str, int] = {}
_SCANNED = [0]

"""Module-name rules shared by every layer: the namespace-prefix match and profkit's own code.

Both used to exist in several copies (the settings, the ELT profiler, the runner's
traceback trimming), each with slightly different rules. They live here, in the API
package, because profilers may import only :mod:`profkit.api` and the call-tree model,
and a user's profiler filtering by ``PROFKIT_NAMESPACE_PREFIX`` needs the same rule ours
uses.
"""

from __future__ import annotations

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


def prefix_matches(module: str, prefixes: tuple[str, ...]) -> bool:
    """True when ``module`` is one of ``prefixes`` or inside one (module-path boundaries).

    ``myapp`` matches ``myapp`` and ``myapp.core`` but not ``myapplication``.
    """
    for prefix in prefixes:
        if module == prefix or (module.startswith(prefix) and module[len(prefix)] == "."):
            return True
    return False


def is_profkit_module(module: str) -> bool:
    """Whether ``module`` is profkit's own machinery or the launcher's (never shown)."""
    return prefix_matches(module, PROFKIT_MODULES) or prefix_matches(module, LAUNCHER_MODULES)

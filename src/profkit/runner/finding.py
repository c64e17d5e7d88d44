"""Finding and compiling the program ``profkit run`` runs, as ``python`` would, before
any profiling: a program that cannot be found or compiled fails early, in python's words.

``-m``'s packages are found without running them (:mod:`profkit.engine.modspec`): their
code is the program's, run in the recording (:meth:`profkit.runner.python.Running.import_package`).
"""

from __future__ import annotations

import os
import types

from profkit._record import record
from profkit.engine import modspec
from profkit.errors import NoSuchModuleError, UsageError

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any


@record(frozen=True)
class Prepared:
    """A compiled program and the extra ``__main__`` globals it runs with."""

    code: types.CodeType | None
    globals: dict[str, Any]
    #: ``-m pkg.mod``: the package ``python -m`` imports (so runs) before the module, not
    #: imported yet. Its code is the program's: it runs in the recording, first
    #: (:meth:`Running.import_package`), not while profkit finds the module.
    package: str | None = None


def need_main(target: str) -> None:
    """A directory or zip app must hold a ``__main__`` module: without one, python's one
    line and exit status 1 (runpy's 13-line traceback came out instead, issue #22)."""
    import pkgutil  # directory and zip apps only

    importer = pkgutil.get_importer(target)
    find = getattr(importer, "find_spec", None)
    if find is None or find("__main__") is None:
        # python names sys.path[0], the app's absolute path
        raise NoSuchModuleError(f"can't find '__main__' module in {os.path.abspath(target)!r}")


def module_details(name: str, package: str | None = None) -> Prepared:
    """Find ``name`` (or ``name.__main__`` for a package) as ``python -m`` does, failing
    with its words and its exit status (1)."""
    import importlib.util  # -m only

    try:
        # First without running the packages (their code belongs in the profile); only
        # what that cannot find is looked up the importing way, as before.
        spec = modspec.spec_without_running(name) or importlib.util.find_spec(name)
    except Exception as exc:  # (importing a parent package runs its code, which may fail)
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and name.endswith(".py"):
            hint = f". Try using {name[:-3]!r} instead of {name!r} as the module name."
        raise NoSuchModuleError(
            f"Error while finding module specification for {name!r} "
            f"({type(exc).__name__}: {exc}){hint}"
        ) from None
    if spec is None:
        if package is not None:
            raise NoSuchModuleError(
                f"No module named {name}; {package!r} is a package and cannot be directly executed"
            )
        raise NoSuchModuleError(f"No module named {name}")
    if spec.submodule_search_locations is not None:  # a package: run its __main__
        if package is not None:
            raise NoSuchModuleError(f"Cannot use package as __main__ module ({name!r})")
        return module_details(name + ".__main__", name)
    loader = spec.loader
    try:
        code = (
            loader.get_code(spec.name)
            if loader is not None and hasattr(loader, "get_code")
            else None
        )
    except SyntaxError as exc:
        raise UsageError(syntax_error(exc, spec.origin or name)) from None
    except (ImportError, OSError, ValueError) as exc:
        raise UsageError(f"cannot load module {name!r}: {exc}") from None
    if code is None:
        raise UsageError(f"no code object available for module {name!r}")
    return Prepared(
        code,
        {
            "__file__": spec.origin,
            "__cached__": spec.cached,
            "__loader__": loader,
            "__package__": spec.parent,
            "__spec__": spec,
        },
        modspec.pending_package(spec),
    )


def compile_source(source: str | bytes, filename: str, shown: str) -> types.CodeType:
    """``compile``, with a syntax error (or NUL byte, bad encoding) as one usage line."""
    try:
        return compile(source, filename, "exec")
    except SyntaxError as exc:
        raise UsageError(syntax_error(exc, shown)) from None
    except ValueError as exc:  # "source code string cannot contain null bytes" (3.11)
        raise UsageError(f"{shown}: {exc}") from None


def syntax_error(exc: SyntaxError, shown: str) -> str:
    where = f"{shown}, line {exc.lineno}" if exc.lineno else shown
    return f"{where}: {type(exc).__name__}: {exc.msg}"

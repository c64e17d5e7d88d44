"""Function names as the rest of profkit writes them (``module.qualname``), from outside.

In-process, profkit names a function's module by matching ``co_filename`` against
``sys.modules`` (:func:`profkit.api.names.module_of`), the script run as the program
is ``__main__``, a module run with ``-m`` keeps its own name (the ELT profiler's rule) and
``<frozen runpy>`` is ``runpy``. The target's ``sys.modules`` is a dict in another process;
reading it on every new file would cost more than the rule is worth, so the module is
derived from the file on disk instead: its directory chain of ``__init__.py`` packages.
That gives the same name for every regular module and package; namespace packages (no
``__init__.py``) lose their package part, and code made by ``exec`` in some module
(``<string>``) has no module, exactly as in-process.
"""

from __future__ import annotations

import os

from profkit.api.names import frozen_module
from profkit.sampler.procinfo import open_target_file

#: Interpreter options that take the next argument as their value.
_OPTION_WITH_VALUE = {"-X", "-W", "--check-hash-based-pycs"}


class Namer:
    """Caches ``file → module`` for one target process."""

    def __init__(self, pid: int, main_file: str | None = None, main_module: str | None = None):
        self.pid = pid
        self.main_file = main_file
        self.main_module = main_module
        self._modules: dict[str, str] = {}

    @classmethod
    def for_process(cls, pid: int) -> Namer:
        """Guess the program's ``__main__`` from the target's command line and cwd."""
        main_file, main_module = main_of(pid)
        return cls(pid, main_file, main_module)

    def module(self, filename: str) -> str:
        """The module a function in ``filename`` is named under."""
        found = self._modules.get(filename)
        if found is None:
            found = self._modules[filename] = self._module(filename)
        return found

    def full_name(self, filename: str, qualname: str) -> str:
        module = self.module(filename)
        return f"{module}.{qualname}" if module else qualname

    def _module(self, filename: str) -> str:
        frozen = frozen_module(filename)
        if frozen is not None:
            return frozen
        if filename.startswith("<"):
            return ""
        if self.main_file is not None and filename == self.main_file:
            return "__main__"
        name = module_from_path(filename, lambda p: open_target_file(self.pid, p))
        if self.main_module and name in (self.main_module, f"{self.main_module}.__main__"):
            return self.main_module
        return name


def module_from_path(filename: str, resolve: object = None) -> str:
    """``pkg.sub.mod`` for ``.../pkg/sub/mod.py`` when pkg and sub hold ``__init__.py``."""
    base = os.path.basename(filename)
    stem = base[:-3] if base.endswith(".py") else base.rsplit(".", 1)[0] if "." in base else base
    parts = [] if stem == "__init__" else [stem]
    directory = os.path.dirname(filename)
    fix = resolve if callable(resolve) else (lambda p: p)
    for _ in range(32):
        if not directory or not os.path.exists(fix(os.path.join(directory, "__init__.py"))):
            break
        parts.insert(0, os.path.basename(directory))
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return ".".join(parts) if parts else stem


def main_of(pid: int) -> tuple[str | None, str | None]:
    """(absolute script path, None) or (None, module) of ``python [opts] script|-m mod``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\0") if a]
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None, None
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in _OPTION_WITH_VALUE:
            i += 2
            continue
        if arg == "-" or not arg.startswith("-"):
            if arg == "-":
                return None, None
            return os.path.normpath(os.path.join(cwd, arg)), None
        if arg.startswith("--") or arg[:2] in ("-X", "-W"):
            i += 1
            continue
        for k, flag in enumerate(arg[1:], start=2):
            if flag == "c":
                return None, None
            if flag == "m":
                module = arg[k:] or (argv[i + 1] if i + 1 < len(argv) else "")
                return None, module or None
        i += 1
    return None, None

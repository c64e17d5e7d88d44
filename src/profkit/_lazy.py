"""Package exports imported on first use (PEP 562), for packages whose names pull in heavy
modules: importing one submodule must not pay for all of them (``profkit profdata show``
needs only the readers; every ``profkit run`` asks :mod:`profkit.clr.assembly` one
question). One implementation, so the packages agree on look-up, caching and ``dir()``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package whose ``globals()`` is ``namespace``:
    ``exports`` maps a public name to the submodule (relative to the package) defining it.
    A name once loaded is stored in the namespace, so later look-ups are plain reads."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__

"""The backend table: every collector by name, with its class, capabilities and availability.

Everything that needs to know about a backend (``select.choose``, ``attach``'s capability
check, building the backend) asks this table, so a new backend is one row here. A row names
its module instead of importing it: a backend's module is loaded only when the backend is
asked about (the start-up hook runs in every Python process, and ``sys.monitoring`` code
has nothing to do on 3.11).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from profkit.api.events import EventMask
from profkit.collect.base import Backend, Capabilities

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

    from profkit.collect.context import BackendContext


def _always() -> str | None:
    return None


def _monitoring_unavailable() -> str | None:
    if not hasattr(sys, "monitoring"):  # 3.11: the answer without importing four modules
        return "sys.monitoring needs Python 3.12+"
    from profkit.collect.monitoring import reason_unavailable

    return reason_unavailable()


def _evalframe_unavailable() -> str | None:
    if sys.version_info[:2] != (3, 11):  # the answer without importing the module
        return "the evalframe backend is for Python 3.11 only (3.12+ has sys.monitoring)"
    from profkit.collect.evalframe import reason_unavailable

    return reason_unavailable()


def _evalframe_refuses(mask: EventMask) -> str | None:
    """Why ``auto`` does not take evalframe for ``mask``: it needs events a frame-evaluation
    function cannot see (C calls above all: ELT trace mode takes it with ``--no-c-calls``),
    or another frame-evaluation function is installed."""
    from profkit.collect import evalframe
    from profkit.collect.select import TRACING_BITS

    missing = mask & TRACING_BITS & ~evalframe.CAPABILITIES.events
    if missing:
        return f"the mask needs {EventMask(missing)!r}"
    return evalframe.conflict()


class BackendRow:
    """One backend: where it lives and whether it can run here.

    A plain class, not a dataclass: this module is imported by every profiled process at
    start-up, and building a dataclass costs more than the rest of the module.
    """

    __slots__ = (
        "auto",
        "chosen_because",
        "cls",
        "module",
        "name",
        "takes_context",
        "tracing",
        "unavailable",
    )

    def __init__(
        self,
        name: str,
        module: str,
        cls: str,
        unavailable: Callable[[], str | None] = _always,
        *,
        takes_context: bool = True,
        tracing: bool = True,
        chosen_because: str = "",
        auto: Callable[[EventMask], str | None] | None = None,
    ) -> None:
        self.name = name
        #: module holding the class and its ``CAPABILITIES``
        self.module = module
        #: the class, built with a :class:`~profkit.collect.context.BackendContext`
        self.cls = cls
        #: why it cannot run in this interpreter, or None
        self.unavailable = unavailable
        #: whether its class takes the context (the sampler-only slot installs nothing)
        self.takes_context = takes_context
        #: whether it serves tracing events (``select.choose`` picks the first that can run)
        self.tracing = tracing
        #: the reason ``select.choose`` gives when it picks this one first
        self.chosen_because = chosen_because
        #: why ``select.choose`` may not pick it for a mask without being asked by name,
        #: or None; no test: it may always
        self.auto = auto

    @property
    def capabilities(self) -> Capabilities:
        """What it can deliver (its module is imported, the class is not built)."""
        caps: Capabilities = importlib.import_module(self.module).CAPABILITIES
        return caps

    def make(self, ctx: BackendContext) -> Backend:
        """Build it for one session."""
        cls: Any = getattr(importlib.import_module(self.module), self.cls)
        backend: Backend = cls(ctx) if self.takes_context else cls()
        return backend


#: Preference order: the first available tracing backend wins (``select.choose``).
TABLE: dict[str, BackendRow] = {
    row.name: row
    for row in (
        BackendRow(
            "monitoring",
            "profkit.collect.monitoring",
            "MonitoringBackend",
            _monitoring_unavailable,
            chosen_because="sys.monitoring is available",
        ),
        BackendRow(
            "evalframe",
            "profkit.collect.evalframe",
            "EvalframeBackend",
            _evalframe_unavailable,
            chosen_because="a frame-evaluation function (3.11) serves the mask",
            auto=_evalframe_refuses,
        ),
        BackendRow(
            "setprofile",
            "profkit.collect.setprofile",
            "SetprofileBackend",
            chosen_because="a profile function works on every Python",
        ),
        BackendRow(
            "sampler", "profkit.collect.sampler", "NullBackend", takes_context=False, tracing=False
        ),
    )
}

#: Backend names, in preference order.
NAMES = tuple(TABLE)


def row(name: str) -> BackendRow | None:
    """The row of backend ``name``, or None for an unknown name."""
    return TABLE.get(name)


def unavailable(name: str) -> str | None:
    """Why backend ``name`` cannot run in this interpreter, or None."""
    found = TABLE.get(name)
    if found is None:
        return f"unknown backend {name!r} (choose from {', '.join(NAMES)} or auto)"
    return found.unavailable()


def capabilities(name: str) -> Capabilities:
    """The capability flags of backend ``name`` (without constructing it)."""
    return TABLE[name].capabilities


def make(name: str, ctx: BackendContext) -> Backend:
    """Build backend ``name`` for the session behind ``ctx``."""
    return TABLE[name].make(ctx)

"""The backend table: every collector by name, with its class, capabilities and availability.

Everything that needs to know about a backend (``select.choose``, ``attach``'s capability
check, building the backend) asks this table, so a new backend is one row here. A row names
its module instead of importing it: a backend's module is loaded only when the backend is
asked about (the start-up hook runs in every Python process, and ``sys.monitoring`` code
has nothing to do on 3.11).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from profkit.collect.base import Backend, Capabilities

if TYPE_CHECKING:
    from profkit.collect.context import BackendContext


def _always() -> str | None:
    return None


def _monitoring_unavailable() -> str | None:
    from profkit.collect.monitoring import reason_unavailable

    return reason_unavailable()


@dataclass(frozen=True, slots=True)
class BackendRow:
    """One backend: where it lives and whether it can run here."""

    name: str
    #: module holding the class and its ``CAPABILITIES``
    module: str
    #: the class, built with a :class:`~profkit.collect.context.BackendContext`
    cls: str
    #: why it cannot run in this interpreter, or None
    unavailable: Callable[[], str | None] = _always
    #: whether its class takes the context (the sampler-only slot installs nothing)
    takes_context: bool = True
    #: whether it serves tracing events (``select.choose`` picks the first that can run)
    tracing: bool = True
    #: the reason ``select.choose`` gives when it picks this one first
    chosen_because: str = ""

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

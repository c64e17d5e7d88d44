"""What a backend may read and call: the narrow side of the session.

A backend gets this instead of the session, so the session can change without touching
the backends and a backend cannot reach the lifecycle (``start``/``detach``) or the
profiler's other methods. Everything here is bound when a backend is built or re-armed,
never looked up per event.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType

from profkit.api.events import EventMask
from profkit.api.ids import FunctionId
from profkit.collect.idtables import FunctionTable, ModuleTable, ThreadTable
from profkit.collect.plan import Fn, Plan, overridden

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

    from profkit.collect.session import Session


class BackendContext:
    """The id tables, the current plan, the failure rule and the collector settings."""

    def __init__(self, session: Session) -> None:
        catalog = session.catalog
        self._session = session
        #: id tables (the backends register codes, modules and threads in them)
        self.functions: FunctionTable = catalog.functions
        self.modules: ModuleTable = catalog.modules
        self.threads: ThreadTable = catalog.threads
        #: register a code object, deliver its first execution, ask the filter
        self.discover: Callable[[CodeType], tuple[FunctionId, bool]] = catalog.discover
        #: a thread's frames → ids, outermost first (the sampler's stack walk)
        self.frames_to_ids: Callable[..., tuple[FunctionId, ...]] = catalog.frames_to_ids
        #: the failure rule: ``fail(exc, what)`` on the hot path, ``call`` elsewhere
        self.fail: Callable[[BaseException, str], None] = session.rule.fail
        self.call: Callable[..., None] = session.rule.call
        #: may the backend use its C parts
        self.native: bool = session.native
        self.sample_interval: float = session.sample_interval
        self.sample_clock: str = session.sample_clock
        self.allocation_sampling: float = session.allocation_sampling
        #: whether a code object is profkit's or the profiler's own (never reported)
        self.is_own: Callable[[CodeType], bool] = catalog.is_own

    @property
    def plan(self) -> Plan:
        """The profiler's bound callbacks for the current mask."""
        return self._session.plan

    @property
    def mask(self) -> EventMask:
        """The current event mask."""
        return self._session.mask

    @property
    def active(self) -> bool:
        """False once the session detached (side hooks check it per notification)."""
        return self._session.active

    def callback(self, name: str) -> Fn:
        """The profiler's method ``name`` if it overrides the base no-op, else None."""
        return overridden(self._session.profiler, name)

    def method(self, name: str) -> Callable[..., Any]:
        """The profiler's bound method ``name`` (``stack_sample``: always called)."""
        fn: Callable[..., Any] = getattr(self._session.profiler, name)
        return fn

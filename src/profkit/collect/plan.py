"""The plan: which of the profiler's callbacks the backends call, bound once.

Built from the event mask and from which :class:`ProfilerCallback` methods the profiler
overrides: a notification that is still the base no-op is ``None`` here, and backends do
not register the interpreter event that would feed it. This is how a profiler pays only
for what it implements *and* selects.
"""

from __future__ import annotations

from collections.abc import Callable

from profkit._record import record
from profkit.api.callback import ProfilerCallback
from profkit.api.events import EventMask

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

Fn = Callable[..., "Any"] | None

#: Every event-mask bit.
ALL_EVENTS = EventMask(0)
for _bit in EventMask:
    ALL_EVENTS |= _bit


def overridden(profiler: ProfilerCallback, name: str) -> Fn:
    """The profiler's bound method ``name`` if it differs from the base no-op, else None."""
    base = getattr(ProfilerCallback, name)
    impl = getattr(type(profiler), name, base)
    if impl is base:
        return None
    method: Callable[..., Any] = getattr(profiler, name)
    return method


@record(frozen=True)
class Plan:
    """Bound callbacks for one mask; ``None`` means: do not even hook the event."""

    mask: EventMask
    first_execution: Fn = None
    enter: Fn = None
    leave: Fn = None
    yield_: Fn = None
    resume: Fn = None
    arguments: Fn = None
    return_value: Fn = None
    to_native: Fn = None
    to_python: Fn = None
    thrown: Fn = None
    unwind: Fn = None
    caught: Fn = None
    reraised: Fn = None
    #: ``ENABLE_SHADOW_STACK``: read from frames on demand, so it hooks nothing
    shadow: bool = False

    @property
    def tracks_calls(self) -> bool:
        """Whether function start/return events must be hooked at all."""
        return bool(
            self.enter
            or self.leave
            or self.yield_
            or self.resume
            or self.arguments
            or self.return_value
            or self.unwind
        )

    @property
    def wants_exceptions(self) -> bool:
        """Whether raise/handled/reraise events must be hooked."""
        return bool(self.thrown or self.caught or self.reraised)

    @property
    def wants_transitions(self) -> bool:
        """Whether C calls must be hooked."""
        return bool(self.to_native or self.to_python)


def make_plan(profiler: ProfilerCallback, mask: EventMask) -> Plan:
    """Bind the callbacks the mask selects and the profiler implements (a call
    notification the profiler hands over in :meth:`~ProfilerCallback.call_events` as it is)."""
    given = profiler.call_events()

    def pick(bit: EventMask, name: str) -> Fn:
        if not mask & bit:
            return None
        hook: Fn = getattr(given, name, None)
        return hook if hook is not None else overridden(profiler, name)

    m = EventMask
    return Plan(
        mask=mask,
        first_execution=pick(m.FIRST_EXECUTION, "function_first_execution"),
        enter=pick(m.ENTER_LEAVE, "function_enter"),
        leave=pick(m.ENTER_LEAVE, "function_leave"),
        yield_=pick(m.ENTER_LEAVE, "function_yield"),
        resume=pick(m.ENTER_LEAVE, "function_resume"),
        arguments=pick(m.FUNCTION_ARGS, "function_arguments"),
        return_value=pick(m.FUNCTION_RETVAL, "function_return_value"),
        to_native=pick(m.CODE_TRANSITIONS, "python_to_native_transition"),
        to_python=pick(m.CODE_TRANSITIONS, "native_to_python_transition"),
        thrown=pick(m.EXCEPTIONS, "exception_thrown"),
        unwind=pick(m.EXCEPTIONS, "exception_unwind_function_leave"),
        caught=pick(m.EXCEPTIONS, "exception_caught"),
        reraised=pick(m.EXCEPTIONS, "exception_reraised"),
        shadow=bool(mask & m.ENABLE_SHADOW_STACK),
    )

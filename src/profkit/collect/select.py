"""Backend choice in one place, with the reason for it (coverage's ``core.py``).

Order: ``monitoring`` (3.12+, cheapest, filtered code runs at full speed), then
``evalframe`` (3.11, when the mask needs no C calls, arguments, return values or exception
events: a frame-evaluation function, no profile function), then ``setprofile`` (any
version, every call pays a Python callback). A profiler that selects sampling and no
tracing event gets the ``sampler`` backend and no tracing hook at all.
``PROFKIT_BACKEND`` or ``attach(backend=...)`` forces one; an impossible choice fails.
What each backend is and whether it can run here comes from the table in ``backends.py``.
"""

from __future__ import annotations

from profkit._record import record
from profkit.api.errors import UnsupportedEventError
from profkit.api.events import EventMask
from profkit.collect.backends import NAMES, TABLE, capabilities, unavailable

BACKENDS = NAMES

#: Bits that need a tracing backend (everything else is served by side hooks or the sampler).
TRACING_BITS = (
    EventMask.ENTER_LEAVE
    | EventMask.FIRST_EXECUTION
    | EventMask.CODE_TRANSITIONS
    | EventMask.EXCEPTIONS
    | EventMask.FUNCTION_ARGS
    | EventMask.FUNCTION_RETVAL
    | EventMask.ENABLE_SHADOW_STACK
)


@record(frozen=True)
class Choice:
    """The backend picked and why (shown by ``profkit run --debug`` and in reports)."""

    name: str
    reason: str


def choose(requested: str, mask: EventMask) -> Choice:
    """Pick a backend for ``mask``; ``requested`` is ``"auto"`` or a backend name."""
    if requested != "auto":
        why = unavailable(requested)
        if why is not None:
            raise UnsupportedEventError(f"backend {requested} unavailable: {why}")
        missing = mask & TRACING_BITS & ~capabilities(requested).events
        if missing:
            raise UnsupportedEventError(
                f"the {requested} backend cannot deliver {EventMask(missing)!r}"
            )
        return Choice(requested, "forced")
    if mask & EventMask.SAMPLING and not mask & TRACING_BITS:
        sampling_only = next(row for row in TABLE.values() if not row.tracing)
        return Choice(sampling_only.name, "the event mask selects sampling and no tracing event")
    refused: list[str] = []
    for row in TABLE.values():
        if not row.tracing:
            continue
        why = row.unavailable()
        if why is None and row.auto is not None:
            why = row.auto(mask)
        if why is None:
            return Choice(row.name, "; ".join(refused) or row.chosen_because)
        refused.append(f"{row.name} refused: {why}")
    raise UnsupportedEventError(f"no tracing backend can run here: {'; '.join(refused)}")

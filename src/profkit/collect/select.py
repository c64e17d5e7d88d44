"""Backend choice in one place, with the reason for it (coverage's ``core.py``).

Order: ``monitoring`` (3.12+, cheapest, filtered code runs at full speed), then
``setprofile`` (any version, every call pays a Python callback). A profiler that selects
sampling and no tracing event gets the ``sampler`` backend and no tracing hook at all.
``PROFKIT_BACKEND`` or ``attach(backend=...)`` forces one; an impossible choice fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from profkit.api.errors import UnsupportedEventError
from profkit.api.events import EventMask

BACKENDS = ("monitoring", "setprofile", "sampler")

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


@dataclass(frozen=True, slots=True)
class Choice:
    """The backend picked and why (shown by ``profkit run --debug`` and in reports)."""

    name: str
    reason: str


def unavailable(name: str) -> str | None:
    """Why backend ``name`` cannot run in this interpreter, or None."""
    if name == "monitoring":
        from profkit.collect.monitoring import reason_unavailable

        return reason_unavailable()
    if name in ("setprofile", "sampler"):
        return None
    return f"unknown backend {name!r} (choose from {', '.join(BACKENDS)} or auto)"


def choose(requested: str, mask: EventMask) -> Choice:
    """Pick a backend for ``mask``; ``requested`` is ``"auto"`` or a backend name."""
    if requested != "auto":
        why = unavailable(requested)
        if why is not None:
            raise UnsupportedEventError(f"backend {requested} unavailable: {why}")
        if requested == "sampler" and mask & TRACING_BITS:
            raise UnsupportedEventError(
                f"the sampler backend cannot deliver {EventMask(mask & TRACING_BITS)!r}"
            )
        return Choice(requested, "forced")
    if mask & EventMask.SAMPLING and not mask & TRACING_BITS:
        return Choice("sampler", "the event mask selects sampling and no tracing event")
    why = unavailable("monitoring")
    if why is None:
        return Choice("monitoring", "sys.monitoring is available")
    return Choice("setprofile", f"monitoring refused: {why}")

"""The backend boundary: what every collector offers the session (coverage's ``Tracer``).

A backend is built with the session's :class:`~profkit.collect.plan.Plan` (the profiler's
bound callbacks, already chosen), so nothing is looked up per event and no attributes are
poked in afterwards. The session only ever talks to this protocol.
"""

from __future__ import annotations

from profkit._record import record
from profkit.api.events import EventMask

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # the protocols below are for type checkers only


@record(frozen=True)
class Capabilities:
    """What a backend can deliver, so callers test flags instead of class names."""

    #: Event-mask bits this backend can honour.
    events: EventMask
    #: Rejected functions run at (almost) full speed (``sys.monitoring.DISABLE``).
    cheap_filter: bool
    #: Sees threads that already run at attach (not only threads started later).
    all_threads: bool
    #: Exception notifications beyond ``exception_unwind_function_leave``.
    full_exceptions: bool


class Backend(Protocol):
    """One collector engine: started once, stopped once, re-armed when the mask changes."""

    name: str
    capabilities: Capabilities

    def start(self) -> None:
        """Install the interpreter hooks."""

    def stop(self) -> None:
        """Remove every hook; safe to call twice and from inside a callback."""

    def rearm(self) -> None:
        """Re-read the session's plan (mutable mask bits or the filter changed)."""

    def abandon(self) -> None:
        """In a forked child: take the hooks out of the interpreter, as :meth:`stop` does,
        but leave what they recorded untouched: it is the parent's, and tearing it down
        would write to (so copy) every page of it, for nothing (issue 22, item 13)."""

    #: Whether this part can go on in a forked child, for the profiler reset there in
    #: place (:meth:`resume_after_fork`); False: it is abandoned and a new session made.
    resumes_after_fork: bool

    def resume_after_fork(self) -> None:
        """In a forked child, once the profiler was reset in place: record again, with
        the hooks and tables as they are (building them anew in the child ran Python
        code whose every touched page was copied from the parent: issue 22, item 13)."""

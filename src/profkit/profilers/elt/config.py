"""What the ELT profiler reads from its settings: a protocol, not an import.

Profilers are built on :mod:`profkit.api` and the call-tree model alone; they do not import
:mod:`profkit.settings` (the table of ``PROFKIT_*`` variables, owned by the runner side).
Whoever builds the profiler — ``profkit run``, the start-up hook, a test, your code — hands
it an object with these attributes; :class:`profkit.settings.Settings` is one.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any, Protocol
else:
    Protocol = object  # the protocols below are for type checkers only


class EltSettings(Protocol):
    """The settings the ELT profiler reads (see :data:`profkit.settings.SETTINGS`)."""

    @property
    def mode(self) -> str: ...
    @property
    def prefixes(self) -> tuple[str, ...]: ...
    @property
    def basetime_ns(self) -> int: ...
    @property
    def unit(self) -> str: ...
    @property
    def stream(self) -> str | None: ...
    @property
    def udp(self) -> tuple[str, int] | None: ...
    @property
    def timeline(self) -> bool: ...
    @property
    def native(self) -> str: ...
    @property
    def c_calls(self) -> bool:
        """C functions as nodes (optional: an object without it means True)."""
        ...

    @property
    def compensate(self) -> bool:
        """Take the calibrated cost per call out of recorded times (optional: True)."""
        ...

    def replace(self, **changes: Any) -> EltSettings:
        """A copy with some values changed (``mode`` for :class:`SamplingProfiler`)."""
        ...

    def as_dict(self) -> dict[str, str]:
        """Every setting as text: recorded in the profile's metadata."""
        ...

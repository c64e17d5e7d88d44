"""Errors raised by :class:`~profkit.api.ProfilerInfo` to a misbehaving profiler."""

from __future__ import annotations

from profkit.errors import ProfkitError


class ProfilerApiError(ProfkitError):
    """A profiler used the API wrongly (the ``HRESULT`` failure analogue)."""


class ImmutableFlagError(ProfilerApiError):
    """An immutable event-mask bit was changed outside ``initialize`` (``CORPROF_E_IMMUTABLE_FLAGS_SET``)."""


class UnsupportedEventError(ProfilerApiError):
    """The active backend cannot deliver a requested notification category."""


class UnknownIdError(ProfilerApiError):
    """An id that profkit never issued, or whose lifetime has ended."""


class NotAvailableError(ProfilerApiError):
    """A service that needs an event-mask bit that is not set (e.g. a stack snapshot)."""

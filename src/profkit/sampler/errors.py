"""The sampler's errors: each is a one-line :class:`~profkit.errors.ProfkitError`.

Why separate classes: callers branch on them. A target that goes away mid-sample is not a
failure (the profile ends cleanly), a permission problem is the user's to fix, a version
without offsets is profkit's to support.
"""

from __future__ import annotations

from profkit.errors import ProfkitError


class AttachError(ProfkitError):
    """The process cannot be sampled: not Python, unknown version, no such process."""


class PermissionDenied(AttachError):
    """The kernel refused to let us read the target's memory (the message says why)."""


class ProcessGone(AttachError):
    """The target exited (or exec'd into something else) while we were reading it."""


class ReadFault(AttachError):
    """An address in the target could not be read (a torn read while the target runs)."""

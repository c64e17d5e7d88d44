"""The saved result of ``profkit run``: call trees per thread, with frames and metadata.

The profilers fill a :class:`CallProfile`; reports and exporters read one. The file
format (versioned JSON) lives in :mod:`profkit.calltree.file`.
"""

from profkit.calltree.model import CallNode, CallProfile, Frame, Span, ThreadTree

__all__ = ["CallNode", "CallProfile", "Frame", "Span", "ThreadTree"]

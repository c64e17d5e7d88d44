"""Side hooks that every backend shares: threads, module loads, garbage collection."""

from __future__ import annotations

from profkit.collect.base import Capabilities
from profkit.collect.plan import ALL_EVENTS
from profkit.collect.session import Session

CAPABILITIES = Capabilities(events=ALL_EVENTS, cheap_filter=True, all_threads=True, full_exceptions=False)


class SideHooks:
    """Installs the thread, import and ``gc.callbacks`` hooks the mask selects."""

    name = "side-hooks"
    capabilities = CAPABILITIES

    def __init__(self, session: Session) -> None:
        self.session = session

    def start(self) -> None:
        """Install the selected hooks."""

    def stop(self) -> None:
        """Remove them."""

    def rearm(self) -> None:
        """Re-read the mask."""

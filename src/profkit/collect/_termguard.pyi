def install(cpu_deadline: float, wall_deadline: float, /) -> None:
    """Wrap SIGTERM's C-level handler: a SIGTERM arms deadlines before Python's is flagged."""

def extend(seconds: float, /) -> None:
    """Disarm the CPU deadline, (re-)arm the wall one (the Python handler has started)."""

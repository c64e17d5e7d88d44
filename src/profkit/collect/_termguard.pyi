def install(first_deadline: float, /) -> None:
    """Wrap SIGTERM's C-level handler: a SIGTERM arms a deadline before Python's is flagged."""

def extend(seconds: float, /) -> None:
    """(Re-)arm the deadline to ``seconds`` from now (the Python handler has started)."""

"""Text reports of a saved profile: call tree, flat per-function table, callers view."""

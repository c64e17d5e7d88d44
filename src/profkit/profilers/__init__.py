"""profkit.profilers."""

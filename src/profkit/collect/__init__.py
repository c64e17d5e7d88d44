"""profkit.collect."""

"""profkit.monitor."""

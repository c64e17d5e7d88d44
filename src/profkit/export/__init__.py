"""profkit.export."""

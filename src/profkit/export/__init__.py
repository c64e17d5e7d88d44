"""Exporters: a saved profile to other tools' formats. The one list is :mod:`.registry`."""

"""File formats: pure libraries, bytes in and model out (and back).

Nothing under :mod:`profkit.formats` prints, exits or imports the collector.
"""

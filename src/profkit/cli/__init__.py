"""The ``profkit`` command line: thin wrappers that parse, call the library, print."""

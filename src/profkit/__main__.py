"""``python -m profkit``: the same command line as the ``profkit`` script."""

from profkit.cli.main import entry

if __name__ == "__main__":
    entry()

"""Which frames are the program's own code: the end-of-run tree never folds them.

Folding one-child chains of library frames leads to the hot spot; folding the user's own
functions (``main -> g -> f``) hides where the hot call comes from (finding N12). Kept
apart from the tree's rendering (:mod:`profkit.report.text`), which only asks this.
"""

from __future__ import annotations

import itertools
import os

from profkit.calltree.model import CallProfile
from profkit.report.tree import matches

_MAIN_MODULES = ("__main__", "__mp_main__")
_INSTALLED = ("site-packages", "dist-packages")


def own_frames(profile: CallProfile, prefixes: tuple[str, ...] = ()) -> list[bool]:
    """Which frames are the program's own code, never folded: ``__main__`` (and
    multiprocessing's ``__mp_main__``), modules in the script's directory (the directory
    of a ``__main__`` frame's file, and below it, unless that is an installed package, as
    ``-m pytest``'s is, or a virtual environment's), and ``prefixes`` (``--prefix``). Read from the profile itself, so a saved profile
    folds the same way wherever it is reported."""
    frames = profile.frames
    dirs = tuple(
        {
            os.path.dirname(f.file) + os.sep
            for f in frames
            if matches(f.name, _MAIN_MODULES) and os.path.isabs(f.file) and not _installed(f.file)
        }
    )
    return [
        matches(f.name, _MAIN_MODULES)
        or (bool(prefixes) and matches(f.name, prefixes))
        or (bool(dirs) and f.file.startswith(dirs) and not _installed(f.file))
        for f in frames
    ]


def _installed(path: str) -> bool:
    """A file of an installed package or of the standard library (``.../site-packages/``,
    ``.../lib/python3.11/``): not the user's, even under the script's directory (a venv)."""
    parts = path.split(os.sep)
    return any(
        part in _INSTALLED or (part == "lib" and nxt.startswith("python"))
        for part, nxt in itertools.pairwise(parts)
    )

"""What the text tree leaves out: profkit's own frames, frames outside ``--prefix``, and
(folded views) the import machinery; kept apart from the rendering so a view's rules
read in one place."""

from __future__ import annotations

from profkit.api.names import INTERNAL_MODULES
from profkit.calltree.model import CallProfile
from profkit.report.shown import Hiding
from profkit.report.tree import matches

__all__ = ["INTERNAL_MODULES", "c_functions", "hiding_rules"]
#: Frames at a thread's root that only the runner called (``contextlib.suppress`` around
#: the program's exit, in profiles saved before the runner moved to :mod:`profkit.runner`).
_LAUNCHER_ROOTS = ("contextlib.suppress.",)
_IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_IMPORT_NAMES = ("importlib._bootstrap", "importlib._bootstrap_external")


def hiding_rules(profile: CallProfile, prefixes: tuple[str, ...], fold: bool) -> Hiding:
    """The view's rules: profkit's frames (and those outside ``prefixes``) hidden, import
    machinery folded when ``fold``, C functions hidden at the root (see :func:`c_functions`)."""
    frames = profile.frames
    hidden = [
        matches(f.name, INTERNAL_MODULES)
        or (f.name.startswith(_LAUNCHER_ROOTS) and f.file.endswith("contextlib.py"))
        or (bool(prefixes) and not matches(f.name, prefixes))
        for f in frames
    ]
    imports = (
        [f.file.startswith(_IMPORT_FILES) or matches(f.name, _IMPORT_NAMES) for f in frames]
        if fold
        else []
    )
    return Hiding(len(frames), hidden, imports, c_functions(profile))


def c_functions(profile: CallProfile) -> list[bool]:
    """Frames of C functions as profkit's Python profilers record them (no file, a
    dotted name); other profiles (.NET, hand-made) may have file-less frames anywhere."""
    profiler = profile.metadata.get("profiler")
    if not (isinstance(profiler, str) and profiler.startswith("profkit.profilers.")):
        return []
    return [not f.file and "." in f.name for f in profile.frames]

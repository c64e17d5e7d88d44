"""What the text tree leaves out: profkit's own frames, frames outside ``--prefix``, and
(folded views) the import machinery; and which frames are the program's own code, which
the end-of-run tree never folds (:func:`own_frames`). Kept apart from the rendering so a
view's rules read in one place (one module: the end-of-run tree loads it at every run).

Folding one-child chains of library frames leads to the hot spot; folding the user's own
functions (``main -> g -> f``) hides where the hot call comes from (finding N12).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Collection, Sequence

from profkit.api.names import INTERNAL_MODULES, prefix_test
from profkit.calltree.model import CallNode, CallProfile, Frame
from profkit.report.shown import Columns, Hiding, self_times

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from array import array

__all__ = [
    "INTERNAL_MODULES",
    "ThreadRules",
    "c_functions",
    "heavy_imports",
    "hiding_rules",
    "is_import",
    "own_frames",
]
#: Frames at a thread's root that only the runner called (``contextlib.suppress`` around
#: the program's exit, in profiles saved before the runner moved to :mod:`profkit.runner`).
_LAUNCHER_ROOTS = ("contextlib.suppress.",)
_IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_IMPORT_NAMES = ("importlib._bootstrap", "importlib._bootstrap_external")


def hiding_rules(
    profile: CallProfile,
    prefixes: tuple[str, ...],
    fold: bool,
    unfolded: Collection[int] = (),
    *,
    hidden: list[bool] | None = None,
) -> Hiding:
    """The view's rules: profkit's frames (and those outside ``prefixes``) hidden, import
    machinery folded when ``fold``, C functions hidden at the root (see :func:`c_functions`).

    ``unfolded``: import frames that stay shown although ``fold`` (those where the time or
    the bytes themselves are, :func:`heavy_imports`). ``hidden``: :func:`hidden_frames` of
    the same profile and prefixes, when the caller has it already (a view asks for up to
    three sets of rules; each pass over ~5,000 names cost ~10 M instructions at the end
    of a run, issue #26)."""
    frames = profile.frames
    if hidden is None:
        hidden = hidden_frames(profile, prefixes)
    imports = [is_import(f) for f in frames] if fold else []
    for frame in unfolded:
        if 0 <= frame < len(imports):
            imports[frame] = False
    return Hiding(len(frames), hidden, imports, c_functions(profile))


def hidden_frames(profile: CallProfile, prefixes: tuple[str, ...]) -> list[bool]:
    """Frames every view hides: profkit's own, the launcher's roots, and (with
    ``prefixes``) those outside them."""
    internal = prefix_test(INTERNAL_MODULES)
    kept = prefix_test(prefixes) if prefixes else None
    return [
        internal(f.name)
        or (f.name.startswith(_LAUNCHER_ROOTS) and f.file.endswith("contextlib.py"))
        or (kept is not None and not kept(f.name))
        for f in profile.frames
    ]


#: Share of a thread's total above which an import-machinery frame's own time (or bytes)
#: keeps it out of the fold: issue #25 item 5, where ``_compile_bytecode`` held 60.9 % of a
#: memory profile's bytes (the code objects of every imported module) and the folded tree
#: charged them to whichever module imported, while the flat view and the HTML named it.
HEAVY_SHARE = 0.01


def heavy_imports(
    profile: CallProfile, root: CallNode, self_by_frame: dict[int, int], total: int
) -> set[int]:
    """Import-machinery frames where the time or bytes themselves are: their own share is
    at least :data:`HEAVY_SHARE` of ``total`` and at least half of all the time spent in
    them (``get_data``, ``_compile_bytecode``). Pass-through frames
    (``_call_with_frames_removed``, ``_find_and_load``) stay folded even when some self
    time lands in them: unfolded, they would stand above every nested import."""
    frames = profile.frames
    limit = HEAVY_SHARE * total
    candidates = {
        f
        for f, own in self_by_frame.items()
        if own > 0 and own >= limit and 0 <= f < len(frames) and is_import(frames[f])
    }
    if not candidates:
        return candidates
    inclusive = _inclusive_by_frame(root, candidates)
    return {f for f in candidates if 2 * self_by_frame[f] >= inclusive.get(f, 0)}


class ThreadRules:
    """Each thread's hiding rules and hot spots (self time by shown frame).

    The hot spots are counted with the import machinery unfolded: they name the functions
    where the time is, as the flat view and the HTML do (issue #25 item 5), and an import
    frame that holds a real share itself (:func:`heavy_imports`) stays out of the tree's
    fold too, so all three agree. Without hot spots nothing walks the whole tree (the
    end-of-run tree reads only what it prints), and the fold is as it always was.
    """

    def __init__(
        self, profile: CallProfile, prefixes: tuple[str, ...], fold: bool, hot_spots: bool
    ) -> None:
        self.profile, self.prefixes, self.fold, self.hot_spots = profile, prefixes, fold, hot_spots
        self.hidden = hidden_frames(profile, prefixes)
        self.hiding = hiding_rules(profile, prefixes, fold, hidden=self.hidden)
        self.unfolded = (
            hiding_rules(profile, prefixes, False, hidden=self.hidden)
            if fold and hot_spots
            else None
        )

    def of(self, root: CallNode) -> tuple[dict[int, int], Hiding]:
        """``(hot spots, rules)`` for the thread whose tree is ``root``."""
        if not self.hot_spots:
            return {}, self.hiding
        spots = self_times(root, self.unfolded or self.hiding)
        if not self.fold:
            return spots, self.hiding
        heavy = heavy_imports(self.profile, root, spots, root.inclusive_ns)
        if not heavy:
            return spots, self.hiding
        return spots, hiding_rules(self.profile, self.prefixes, True, heavy, hidden=self.hidden)


def is_import(frame: Frame) -> bool:
    """An import-machinery frame (``<frozen importlib._bootstrap>``): folded by the views."""
    return frame.file.startswith(_IMPORT_FILES) or _is_import_name(frame.name)


_is_import_name = prefix_test(_IMPORT_NAMES)


def _int64_copy(values: Sequence[int]) -> memoryview[int] | array[int]:
    """``values`` as int64s of their own: the recorder's column (a cast memoryview) copied
    as bytes, without loading the array module (~1 M instructions of every end-of-run
    tree; issue #26); any other sequence through ``array``."""
    if isinstance(values, memoryview) and values.format == "q" and values.c_contiguous:
        return memoryview(bytearray(values)).cast("q")
    from array import array

    return array("q", values)


def _inclusive_by_frame(root: CallNode, wanted: set[int]) -> dict[int, int]:
    """Summed inclusive time of every node of the ``wanted`` frames (a frame nested in
    itself counts twice, which only makes :func:`heavy_imports` stricter); over the
    recorder's flat rows when the tree offers them, so no node is made."""
    out: dict[int, int] = {}
    columns: Callable[[], Columns | None] | None = getattr(root, "flat_columns", None)
    flat = columns() if columns is not None else None
    if flat is not None:
        parents, frame_of, exclusive = flat
        sums = getattr(root, "flat_sums", None)  # the rows' own C pass (elt/flat.py)
        found = sums() if sums is not None else None
        if found is not None:
            mask = bytearray(max(wanted) + 1)  # wanted: frames of the profile, >= 0
            for frame in wanted:
                mask[frame] = 1
            done = found(frame_of, exclusive, None, parents, mask)
            if done is not None:
                return done
        inclusive = _int64_copy(exclusive)  # not a list: an int object a row (40 bytes)
        for row in range(len(frame_of) - 1, 0, -1):
            inclusive[parents[row]] += inclusive[row]
            if frame_of[row] in wanted:
                out[frame_of[row]] = out.get(frame_of[row], 0) + inclusive[row]
        return out
    stack = list(root.children.values())
    while stack:
        node = stack.pop()
        if node.frame in wanted:
            out[node.frame] = out.get(node.frame, 0) + node.inclusive_ns
        stack.extend(node.children.values())
    return out


def c_functions(profile: CallProfile) -> list[bool]:
    """Frames of C functions as profkit's Python profilers record them (no file, a
    dotted name); other profiles (.NET, hand-made) may have file-less frames anywhere."""
    profiler = profile.metadata.get("profiler")
    if not (isinstance(profiler, str) and profiler.startswith("profkit.profilers.")):
        return []
    return [not f.file and "." in f.name for f in profile.frames]


_MAIN_MODULES = ("__main__", "__mp_main__")
_INSTALLED = ("site-packages", "dist-packages")


def own_frames(profile: CallProfile, prefixes: tuple[str, ...] = ()) -> list[bool]:
    """Which frames are the program's own code, never folded: ``__main__`` (and
    multiprocessing's ``__mp_main__``), modules in the script's directory (the directory
    of a ``__main__`` frame's file or of the profile's ``argv[0]``, ``-m``'s module, and
    below it, unless that is an installed package, as ``-m pytest``'s is, or a virtual
    environment's), and ``prefixes`` (``--prefix``). Read from the profile itself, so a
    saved profile folds the same way wherever it is reported."""
    frames = profile.frames
    main = prefix_test(_MAIN_MODULES)
    given = prefix_test(prefixes)
    mains = {f.file for f in frames if main(f.name)}
    # `profkit run -m pkg.mod` names mod's frames after it, not __main__: its file is the
    # profile's argv[0] (the bundled demo's fib recursion folded as a library's)
    argv = profile.metadata.get("argv")
    if isinstance(argv, list) and argv and isinstance(argv[0], str) and argv[0].endswith(".py"):
        mains.add(argv[0])
    dirs = tuple(
        {
            os.path.dirname(file) + os.sep
            for file in mains
            if os.path.isabs(file) and not _installed(file)
        }
    )
    return [
        main(f.name)
        or (bool(prefixes) and given(f.name))
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

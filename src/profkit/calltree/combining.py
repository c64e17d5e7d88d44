"""Several processes' profiles (one file each) combined into one.

Why a module of its own: combining is an operation on models (frames re-interned, trees
copied without recursion), not part of reading or writing the file; ``profkit report``
and ``export`` use it for the per-process files of a program that forked.
"""

from __future__ import annotations

from collections.abc import Iterable

from profkit.calltree.model import CallNode, CallProfile, Span, ThreadTree
from profkit.errors import ProfileDataError


def combine(profiles: Iterable[CallProfile]) -> CallProfile:
    """Merge the profiles of several processes (one file each) into one.

    Frames are re-interned into one table; every thread keeps its own tree, named
    ``pid N: <thread>`` and carrying ``pid`` when the source's metadata knows its pid,
    so per-process trees stay apart (the Chrome export gives each its own process). The result's metadata lists each source's metadata under ``"processes"``.
    All inputs must have the same mode.
    """
    items = list(profiles)
    if not items:
        raise ProfileDataError("incompatible", "nothing to combine")
    modes = {p.mode for p in items}
    if len(modes) > 1:
        raise ProfileDataError("incompatible", f"cannot combine modes {sorted(modes)}")
    out = CallProfile(items[0].mode, metadata={"processes": [p.metadata for p in items]})
    for p in items:
        remap = [out.frame_id(f) for f in p.frames]
        first_thread = len(out.threads)
        meta_pid = p.metadata.get("pid")
        for t in p.threads:
            pid = t.pid if t.pid is not None else meta_pid if type(meta_pid) is int else None
            name = f"pid {pid}: {t.name}" if pid is not None else t.name
            out.threads.append(
                ThreadTree(t.thread_id, name, _remap(t.root, remap), t.native_id, pid)
            )
        out.spans.extend(
            Span(first_thread + s.thread, remap[s.frame], s.start_ns, s.end_ns, s.depth)
            for s in p.spans
        )
    return out


def _remap(root: CallNode, remap: list[int]) -> CallNode:
    new_root = CallNode(
        -1, root.calls, root.inclusive_ns, root.exclusive_ns, root.min_ns, root.max_ns
    )
    stack = [(root, new_root)]
    while stack:
        old, new = stack.pop()
        for child in old.children.values():
            frame = remap[child.frame]
            copy = new.children[frame] = CallNode(
                frame,
                child.calls,
                child.inclusive_ns,
                child.exclusive_ns,
                child.min_ns,
                child.max_ns,
            )
            stack.append((child, copy))
    return new_root

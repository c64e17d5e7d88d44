"""One thread's frame chain, walked in Python: what ``_walker.c`` does, for builds without
a C compiler (and to test the C walker against). The rules are the C walker's; see its
comments for why (chunks read whole, frames owned by the C stack skipped, the callers of a
generator whose chain a yield cut read again and spliced on).
"""

from __future__ import annotations

import struct
from array import array

from profkit._record import field, record
from profkit.sampler.layout import Layout
from profkit.sampler.memory import Memory

_FRAME_OWNED_BY_GENERATOR = 1
_FRAME_OWNED_BY_CSTACK = 3
_u64 = struct.Struct("<Q").unpack_from

#: Why a walk stopped early (``Walk.cut``; ``CUT_*`` in _walker.h).
CUT_NONE, CUT_DEPTH, CUT_CYCLE = 0, 1, 2


class LoopCheck:
    """Brent's cycle check over a walk's addresses, as ``LoopCheck`` in _walker.h: O(1)
    memory, and a looping list is found within three times its length plus its tail (a
    torn or hostile chain once cost the whole depth cap: 16.7 M dump lines)."""

    __slots__ = ("mark", "power", "steps")

    def __init__(self, first: int) -> None:
        self.mark, self.power, self.steps = first, 1, 0

    def seen(self, address: int) -> bool:
        """Whether ``address`` (the walk's next) was walked before."""
        if address == self.mark:
            return True
        self.steps += 1
        if self.steps == self.power:
            self.mark, self.power, self.steps = address, self.power * 2, 0
        return False


@record
class Walk:
    """A walk's frames innermost first: ``words`` holds (code, instr) pairs flat, ``addrs``
    each kept frame's address; ``cut_frame`` is the generator frame a yield tore the chain
    at (0: the chain ended normally); ``cut`` why the walk stopped early (``CUT_*``)."""

    words: list[int] = field(default_factory=list)
    addrs: list[int] = field(default_factory=list)
    cut_frame: int = 0
    cut: int = CUT_NONE

    def key(self) -> bytes:
        return array("Q", self.words).tobytes()


def callers_at(again: Walk, cut_frame: int, chunk1: int, top1: int) -> int:
    """Where the callers of the yield-cut generator frame start in ``again`` (a later walk
    of the same thread): after that frame when it is running again, else at the innermost
    frame that existed when the cut walk began (in its chunk, below its data-stack top);
    ``len(again.addrs)`` when neither is there. See ``splice_callers`` in _walker.c."""
    addrs = again.addrs
    if cut_frame in addrs:
        return addrs.index(cut_frame) + 1
    for k, address in enumerate(addrs):
        if chunk1 < address < top1:
            return k
    return len(addrs)


class PyWalker:
    """Walks frame chains of one process with :class:`Memory` reads."""

    def __init__(self, mem: Memory, layout: Layout, max_depth: int, max_chunk: int) -> None:
        self.mem = mem
        self.layout = layout
        self.max_depth = max_depth
        self.max_chunk = max_chunk
        self._chunk_sizes: dict[int, int] = {}

    def walk(self, frame: int, chunk: int) -> Walk:
        """The frames from ``frame`` outwards, innermost first.

        Why chunks: a thread's frames live in its data-stack chunks (16 KiB each, newest
        first), so the newest chunk is read whole in one call and frames inside it cost
        no system call; older chunks are read when the walk reaches them. Frames outside
        every chunk (generators' and coroutines' own frames) are read one by one.
        """
        lay = self.layout
        span = lay.frame_span
        regions: list[tuple[int, int, bytes]] = []
        pending = self._load_chunk(chunk, regions) if chunk else 0
        out = Walk()
        depth = owner = last = 0
        loop = LoopCheck(frame)
        while frame:
            if depth == self.max_depth:
                out.cut = CUT_DEPTH
                break
            depth += 1
            data, at, pending = self._frame_bytes(frame, span, regions, pending)
            code = _u64(data, at + lay.frame_code)[0]
            owner = data[at + lay.frame_owner]
            if owner != _FRAME_OWNED_BY_CSTACK and code:
                out.words += (code, _u64(data, at + lay.frame_instr)[0])
                out.addrs.append(frame)
            last = frame
            frame = _u64(data, at + lay.frame_previous)[0]
            if frame and loop.seen(frame):
                out.cut = CUT_CYCLE
                break
        if not frame and owner == _FRAME_OWNED_BY_GENERATOR:
            out.cut_frame = last
        return out

    def _frame_bytes(
        self, frame: int, span: int, regions: list[tuple[int, int, bytes]], pending: int
    ) -> tuple[bytes, int, int]:
        """(data, offset of the frame in it, the next older chunk not read yet)."""
        for start, end, region in regions:
            if start <= frame and frame + span <= end:
                return region, frame - start, pending
        while pending and self._chunk_holds(pending, frame, span):
            pending = self._load_chunk(pending, regions)
        start, end, data = regions[-1] if regions else (0, 0, b"")
        if start <= frame and frame + span <= end:
            return data, frame - start, pending
        return self.mem.read(frame, span), 0, pending

    def _chunk_holds(self, chunk: int, frame: int, span: int) -> bool:
        size = self._chunk_sizes.get(chunk)
        if size is None:
            size = _u64(self.mem.read(chunk + self.layout.chunk_size, 8), 0)[0]
            self._chunk_sizes[chunk] = size
        return chunk <= frame and frame + span <= chunk + size

    def _load_chunk(self, chunk: int, regions: list[tuple[int, int, bytes]]) -> int:
        """Read one data-stack chunk into ``regions``; return the address of the one before."""
        lay = self.layout
        size = self._chunk_sizes.get(chunk)
        if size is None:
            size = _u64(self.mem.read(chunk + lay.chunk_size, 8), 0)[0]
        if not 0 < size <= self.max_chunk:
            return 0
        data = self.mem.read(chunk, size)
        actual = _u64(data, lay.chunk_size)[0]
        if actual != size:  # freed and reused at another size since we cached it
            self._chunk_sizes.pop(chunk, None)
            if not 0 < actual <= self.max_chunk:
                return 0
            size = actual
            data = self.mem.read(chunk, size)
        if len(self._chunk_sizes) > 4096:
            self._chunk_sizes.clear()
        self._chunk_sizes[chunk] = size
        regions.append((chunk, chunk + size, data))
        return _u64(data, lay.chunk_previous)[0]

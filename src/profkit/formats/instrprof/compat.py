"""Which indexed version the producer of some profiles can read (spec §2.2).

``llvm-profdata merge`` writes its own newest indexed version; a clang older than the
tool cannot read it ("unsupported instrumentation profile format version": a Debian 12
user with clang 14 merging with LLVM 22's tool). profkit reads every version, so it can
instead write the newest version that *whoever produced the inputs* reads:

* a raw file of version R was written by a clang of a known range of releases; the
  oldest of them reads indexed files up to :data:`~.versions.INDEXED_BY_RELEASE` of its release;
* an indexed input of version N was written by a tool that reads N, and the clang
  using it read it too: N;
* a text input says nothing about its producer.

The smallest of those wins (every producer can read it), raised when the merged data
needs a newer version (MC/DC bitmaps, temporal traces, vtable values, loop entries), and
kept within what the writer writes. Facts marked [unverified] in the spec are used as
the spec gives them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from profkit.formats.instrprof.model import Profile, ProfileKind, ValueKind
from profkit.formats.instrprof.versions import (
    BITMAP_FROM,
    INDEXED_BY_RELEASE,
    LOOP_ENTRIES_FROM,
    NEWEST_WRITTEN,
    OLDEST_WRITTEN,
    RAW_RELEASES,
    TEMPORAL_FROM,
    VTABLE_FROM,
)


@dataclass(frozen=True)
class InputVersion:
    """What one input says about its producer: its format and version number."""

    format: str  # "raw", "indexed" or "text"
    version: int | None


@dataclass(frozen=True)
class Choice:
    """The indexed version to write and, in words, why."""

    version: int
    reason: str


def needed_version(profile: Profile) -> tuple[int, str]:
    """The oldest indexed version that can hold ``profile`` (and what needs it)."""
    if profile.kind & ProfileKind.INSTR_LOOP_ENTRIES:
        return LOOP_ENTRIES_FROM, "loop-entry profiles"
    if any(r.value_sites.get(ValueKind.VTABLE_TARGET) for r in profile.records):
        return VTABLE_FROM, "vtable value profiles"
    if any(r.bitmap for r in profile.records):
        return BITMAP_FROM, "MC/DC bitmaps"
    if profile.kind & ProfileKind.TEMPORAL or profile.temporal_traces:
        return TEMPORAL_FROM, "temporal profile traces"
    return OLDEST_WRITTEN, ""


def readable_version(inputs: Iterable[InputVersion], profile: Profile) -> Choice:
    """The newest indexed version every producer of ``inputs`` reads, able to hold ``profile``."""
    best: int | None = None
    why = ""
    for item in inputs:
        if item.version is None:
            continue
        if item.format == "raw" and item.version in RAW_RELEASES:
            oldest, newest = RAW_RELEASES[item.version]
            readable = INDEXED_BY_RELEASE[oldest]
            span = f"clang {oldest}" if oldest == newest else f"clang {oldest}-{newest}"
            reason = (
                f"raw v{item.version} inputs come from {span}, and clang {oldest} "
                f"reads indexed v{readable} at most"
            )
        elif item.format == "indexed":
            readable = item.version
            reason = f"an indexed v{readable} input: its producer reads v{readable}"
        else:
            continue
        if best is None or readable < best:
            best, why = readable, reason
    if best is None:
        return Choice(
            NEWEST_WRITTEN, "no input says which LLVM made it (text only): as llvm-profdata"
        )
    need, what = needed_version(profile)
    if need > best:
        return Choice(need, f"{why}, but {what} need v{need}")
    if best < OLDEST_WRITTEN:
        return Choice(OLDEST_WRITTEN, f"{why}; v{OLDEST_WRITTEN} is the oldest profkit writes")
    if best > NEWEST_WRITTEN:
        return Choice(NEWEST_WRITTEN, f"{why}; v{NEWEST_WRITTEN} is the newest profkit writes")
    return Choice(best, why)


def input_version(data: bytes) -> InputVersion:
    """Format and version of a profile file's bytes, from its first 16 (no parsing)."""
    import struct

    from profkit.formats.instrprof.magics import INDEXED_MAGIC, RAW_MAGICS

    head = bytes(data[:8])
    if len(data) >= 16 and head == INDEXED_MAGIC:
        return InputVersion("indexed", struct.unpack_from("<Q", data, 8)[0] & 0xFFFFFFFF)
    if len(data) >= 16 and head in RAW_MAGICS:
        order = RAW_MAGICS[head][0]
        return InputVersion("raw", struct.unpack_from(order + "Q", data, 8)[0] & 0xFFFFFFFF)
    return InputVersion("text", None)

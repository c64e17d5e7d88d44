"""Hypothesis strategies and oracle helpers shared by the writer-side instrprof tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import strategies as st

from profkit.formats.instrprof.hashing import name_md5
from profkit.formats.instrprof.model import (
    CS_FLAG_IN_FUNC_HASH,
    FunctionRecord,
    Profile,
    ProfileKind,
    TemporalTrace,
    ValueKind,
)

#: llvm-profdata release → the indexed version it writes.
LLVM_INDEXED = {14: 7, 16: 9, 19: 12, 22: 13}

_name_chars = st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters="#:$,")
names = st.text(_name_chars, min_size=1, max_size=12).filter(lambda s: not s.isdigit())
u64 = st.integers(0, (1 << 64) - 1)
small = st.integers(0, 1000)


@st.composite
def profiles(
    draw: st.DrawFn,
    *,
    bitmaps: bool = True,
    vtables: bool = True,
    temporal: bool = True,
    big_counts: bool = True,
) -> Profile:
    """Random merged profiles: unique (name, hash), value targets among the profile's names."""
    fn_names = draw(st.lists(names, min_size=0, max_size=8, unique=True))
    kind = draw(
        st.sampled_from(
            [
                ProfileKind.NONE,
                ProfileKind.IR,
                ProfileKind.IR | ProfileKind.CS_IR,
                ProfileKind.IR | ProfileKind.ENTRY_FIRST,
            ]
        )
    )
    counts_st = u64 if big_counts else small
    records = []
    for name in fn_names:
        hashes = draw(st.lists(st.integers(0, (1 << 62) - 1), min_size=1, max_size=3, unique=True))
        for h in hashes:
            if kind & ProfileKind.CS_IR and draw(st.booleans()):
                h |= CS_FLAG_IN_FUNC_HASH
            counts = draw(st.lists(counts_st, min_size=1, max_size=6))
            bitmap = draw(st.binary(max_size=4)) if bitmaps else b""
            sites: dict[ValueKind, list[list[tuple[int, int]]]] = {}
            kinds = [ValueKind.INDIRECT_CALL_TARGET, ValueKind.MEMOP_SIZE]
            if vtables:
                kinds.append(ValueKind.VTABLE_TARGET)
            for vk in kinds:
                if not draw(st.booleans()):
                    continue
                targets = (
                    st.sampled_from([0, *(name_md5(n) for n in fn_names)])
                    if vk != ValueKind.MEMOP_SIZE
                    else st.integers(0, 600)
                )
                site_list = draw(
                    st.lists(
                        st.lists(
                            st.tuples(targets, st.integers(1, 1000)),
                            max_size=3,
                            unique_by=lambda t: t[0],
                        ),
                        min_size=1,
                        max_size=3,
                    )
                )
                # merged profiles hold each site sorted by count, descending
                sites[vk] = [sorted(s, key=lambda t: -t[1]) for s in site_list]
            records.append(FunctionRecord(name, h, counts, bitmap, sites))
    profile = Profile(kind=kind, records=records, format="text")
    if temporal and fn_names and draw(st.booleans()):
        profile.kind |= ProfileKind.TEMPORAL
        traces = draw(
            st.lists(st.lists(st.sampled_from(fn_names), min_size=1, max_size=4), max_size=3)
        )
        profile.temporal_traces = [TemporalTrace(1, tuple(name_md5(n) for n in t)) for t in traces]
        profile.temporal_trace_stream_size = len(traces)
    return profile


def normalized(profile: Profile) -> list[tuple[object, ...]]:
    """Records as comparable tuples, in (name, hash) order."""
    return sorted(
        (
            r.name,
            r.hash,
            list(r.counts),
            bytes(r.bitmap),
            {k: v for k, v in r.value_sites.items() if v},
        )
        for r in profile.records
    )  # type: ignore[type-var]


def llvm_profdata(version: int) -> str:
    """The path of llvm-profdata-<version>, or skip the test."""
    tool = shutil.which(f"llvm-profdata-{version}")
    if tool is None:
        pytest.skip(f"llvm-profdata-{version} not on PATH")
    return tool


def run_llvm(tool: str, *args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([tool, *map(str, args)], capture_output=True, timeout=60, check=False)

"""Every real raw and indexed fixture (LLVM 14/16/19/22) read into the same records as
``llvm-profdata merge --text`` printed for it (the ``.proftext`` beside it)."""

from __future__ import annotations

import pytest

from profkit.formats.instrprof import FunctionRecord, ProfileKind, ValueKind, read_profile
from profkit.formats.instrprof.summary import compute_summary
from profkit.formats.instrprof.text import parse_text
from tests.formats.instrprof.fixtures import ROOT, entries, ids, path_of

BINARIES = entries("profraw") + entries("profdata")


def _site(site: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """merge adds duplicate values (raw files repeat unknown targets as 0) and sorts."""
    merged: dict[int, int] = {}
    for v, c in site:
        merged[v] = merged.get(v, 0) + c
    return sorted(merged.items())


def _key(rec: FunctionRecord, skip_vtables: bool) -> tuple:
    sites = {
        k: [_site(s) for s in v]
        for k, v in rec.value_sites.items()
        if v and not (skip_vtables and k == ValueKind.VTABLE_TARGET)
    }
    return (rec.name, rec.hash, rec.counts, bytes(rec.bitmap), sites)


@pytest.mark.parametrize("entry", BINARIES, ids=ids(BINARIES))
def test_records_equal_merge_text(entry: dict) -> None:
    path = path_of(entry)
    text_path = ROOT / (entry["path"].rsplit(".", 1)[0] + ".proftext")
    inputs = entry.get("inputs") or []
    if len(inputs) == 1 and inputs[0].endswith(".proftext"):  # cross/: written from a text file
        text_path = ROOT / inputs[0]
    if not text_path.exists():
        pytest.skip("no .proftext beside this fixture")
    prof = read_profile(path)
    expected = parse_text(text_path.read_bytes(), str(text_path))
    # merge --text writes "** External Symbol **" for vtables (spec §7.5.2); we resolve them.
    raw = prof.format == "raw" or entry.get("variant") == "vtable"
    got = sorted(_key(r, raw) for r in prof.records)
    want = sorted(_key(r, raw) for r in expected.records)
    assert got == want
    flags = ProfileKind.IR | ProfileKind.CS_IR | ProfileKind.ENTRY_FIRST | ProfileKind.TEMPORAL
    assert prof.kind & flags == expected.kind & flags
    if prof.temporal_traces or expected.temporal_traces:
        assert [t.function_refs for t in prof.temporal_traces] == [
            t.function_refs for t in expected.temporal_traces
        ]


INDEXED = entries("profdata")


@pytest.mark.parametrize("entry", INDEXED, ids=ids(INDEXED))
def test_stored_summary_equals_computed(entry: dict) -> None:
    prof = read_profile(path_of(entry))
    if prof.summary is None:
        pytest.skip("indexed version without a summary")
    regular, cs = compute_summary(prof.records)
    assert prof.summary == regular
    if prof.cs_summary is not None:
        assert prof.cs_summary == cs

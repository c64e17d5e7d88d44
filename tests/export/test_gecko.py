"""The Firefox Profiler export: the processed format's tables checked as its types say
(src/types/profile.js of firefox-devtools/profiler), and the profile read back from it."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from hypothesis import given, settings

from profkit.calltree.model import CallNode, CallProfile, Span
from profkit.export import gecko, registry
from tests.calltree.strategies import deep_profile, profiles, sample_profile

_TABLES = {
    "samples": ("stack", "time", "weight"),
    "stackTable": ("frame", "prefix"),
    "frameTable": gecko._FRAME_COLUMNS,
    "funcTable": gecko._FUNC_COLUMNS,
    "resourceTable": ("lib", "name", "host", "type"),
    "nativeSymbols": ("libIndex", "address", "name", "functionSize"),
    "markers": ("data", "name", "startTime", "endTime", "phase", "category"),
}


def check(doc: dict[str, Any]) -> None:
    """Every table complete and every index in range (what the profiler's loader trusts)."""
    meta = doc["meta"]
    assert meta["preprocessedProfileVersion"] == gecko.PROCESSED_VERSION
    assert meta["version"] == gecko.GECKO_VERSION
    assert isinstance(meta["interval"], float) and meta["categories"]
    for category in meta["categories"]:
        assert category["name"] and category["color"] and category["subcategories"]
    strings = doc["shared"]["stringArray"]
    assert all(isinstance(s, str) for s in strings)
    for thread in doc["threads"]:
        assert isinstance(thread["name"], str) and isinstance(thread["pid"], str)
        for table, columns in _TABLES.items():
            t = thread[table]
            for column in columns:
                assert len(t[column]) == t["length"], (table, column)
        stacks, frames, funcs = thread["stackTable"], thread["frameTable"], thread["funcTable"]
        # v53 dropped the stack table's categories (a stack takes its frame's), v54 the
        # frame table's implementation: neither may come back
        assert "category" not in stacks and "implementation" not in frames
        for i, (frame, prefix) in enumerate(zip(stacks["frame"], stacks["prefix"], strict=True)):
            assert 0 <= frame < frames["length"]
            assert prefix is None or 0 <= prefix < i  # a caller comes before its callees
        for func, category in zip(frames["func"], frames["category"], strict=True):
            assert 0 <= func < funcs["length"] and 0 <= category < len(meta["categories"])
        for name, resource, file in zip(
            funcs["name"], funcs["resource"], funcs["fileName"], strict=True
        ):
            assert 0 <= name < len(strings)
            assert resource == -1 or 0 <= resource < thread["resourceTable"]["length"]
            assert file is None or 0 <= file < len(strings)
        assert all(0 <= n < len(strings) for n in thread["resourceTable"]["name"])
        check_markers(thread["markers"], meta, strings)
        samples = thread["samples"]
        assert samples["weightType"] in ("samples", "tracing-ms", "bytes")
        assert all(0 <= s < stacks["length"] for s in samples["stack"])
        assert all(w >= 0 for w in samples["weight"])
        assert samples["time"] == sorted(samples["time"])


def check_markers(markers: dict[str, Any], meta: dict[str, Any], strings: list[str]) -> None:
    """Names are strings, categories exist, an interval ends after it starts, and every
    marker's ``data.type`` has a schema whose fields (v55: ``key`` and ``format``) it fills."""
    schemas = {s["name"]: s for s in meta["markerSchema"]}
    for schema in schemas.values():
        assert schema["display"] and all(f["key"] and f["format"] for f in schema["fields"])
        assert all("searchable" not in f for f in schema["fields"])  # removed in v57
    for i in range(markers["length"]):
        assert 0 <= markers["name"][i] < len(strings)
        assert 0 <= markers["category"][i] < len(meta["categories"])
        start, end, phase = markers["startTime"][i], markers["endTime"][i], markers["phase"][i]
        assert isinstance(start, float) and phase in (0, 1)
        assert phase == 1 or end is None  # an instant has no end
        assert end is None or end >= start
        data = markers["data"][i]
        assert {f["key"] for f in schemas[data["type"]]["fields"]} <= set(data)


def self_by_path(doc: dict[str, Any], thread: int) -> dict[tuple[str, ...], float]:
    """The read-back: each stack's own weight by its path of function names."""
    t = doc["threads"][thread]
    strings = doc["shared"]["stringArray"]
    stacks, frames, funcs = t["stackTable"], t["frameTable"], t["funcTable"]

    def path(stack: int | None) -> tuple[str, ...]:
        out: list[str] = []
        while stack is not None:
            out.append(strings[funcs["name"][frames["func"][stacks["frame"][stack]]]])
            stack = stacks["prefix"][stack]
        return tuple(reversed(out))

    found: dict[tuple[str, ...], float] = defaultdict(float)
    for stack, weight in zip(t["samples"]["stack"], t["samples"]["weight"], strict=True):
        found[path(stack)] += weight
    return {k: round(v, 6) for k, v in found.items()}


def tree_self(profile: CallProfile, thread: int, scale: float) -> dict[tuple[str, ...], float]:
    found: dict[tuple[str, ...], float] = {}

    def walk(node: CallNode, path: tuple[str, ...]) -> None:
        for child in node.children.values():
            here = (*path, profile.frames[child.frame].name)
            if child.exclusive_ns:
                found[here] = round(child.exclusive_ns * scale, 6)
            walk(child, here)

    walk(profile.threads[thread].root, ())
    return found


def test_timeline_samples_read_back_as_the_tree() -> None:
    profile = sample_profile()
    doc = json.loads(gecko.write(profile))
    check(doc)
    assert [t["name"] for t in doc["threads"]] == [t.label for t in profile.threads]
    samples = doc["threads"][0]["samples"]
    assert samples["weightType"] == "tracing-ms" and samples["time"][0] == 0.0
    assert self_by_path(doc, 0) == tree_self(profile, 0, 1e-6)
    assert self_by_path(doc, 1) == tree_self(profile, 1, 1e-6)
    funcs = doc["threads"][0]["funcTable"]
    assert doc["shared"]["stringArray"][funcs["fileName"][0]] == "/src/myapp/__init__.py"
    assert funcs["lineNumber"][0] == 10


def test_a_tree_without_timeline_reads_back() -> None:
    profile = sample_profile()
    profile.spans.clear()
    doc = json.loads(gecko.write(profile))
    check(doc)
    assert self_by_path(doc, 0) == tree_self(profile, 0, 1e-6)


def test_memory_profiles_carry_bytes_as_bytes() -> None:
    profile = sample_profile()
    profile.spans.clear()
    profile.mode = "memory"
    doc = json.loads(gecko.write(profile))
    check(doc)
    assert doc["threads"][0]["samples"]["weightType"] == "bytes"
    assert self_by_path(doc, 0) == tree_self(profile, 0, 1.0)


def test_deep_profile() -> None:
    check(json.loads(gecko.write(deep_profile(1500))))


@settings(max_examples=60, deadline=None)
@given(profiles())
def test_any_profile_gives_consistent_tables(profile: CallProfile) -> None:
    check(json.loads(gecko.write(profile)))


def test_one_row_in_the_format_table() -> None:
    row = registry.by_name("gecko") if hasattr(registry, "by_name") else None
    rows = [f for f in registry.EXPORTS if f.name == "gecko"]
    assert len(rows) == 1 and rows[0].extension == ".gecko.json"
    assert row is None or row is rows[0]


def test_dotnet_events_become_markers_on_their_threads() -> None:
    profile = sample_profile()
    main, other = profile.threads[0].thread_id, profile.threads[1].thread_id
    profile.metadata["runtime"] = "CoreCLR"
    profile.metadata["clr_events"] = [
        [2_000_000, main, "gc-start", "2 induced loh"],
        [3_500_000, main, "gc-end", ""],
        [1_000_000, other, "exception", "System.InvalidOperationException"],
        [1_100_000, other, "catch", "ProfTest.Program.Main"],
        [500_000, 99999, "assembly", "Workload"],  # a thread not in the profile: the first
        [1, 2, 3],  # malformed: skipped
    ]
    doc = json.loads(gecko.write(profile))
    check(doc)
    strings = doc["shared"]["stringArray"]

    def shown(thread: int) -> list[tuple[str, float, float | None, str]]:
        m = doc["threads"][thread]["markers"]
        return [
            (strings[n], s, e, d["detail"])
            for n, s, e, d in zip(m["name"], m["startTime"], m["endTime"], m["data"], strict=True)
        ]

    assert shown(0) == [("Assembly load", 0.5, None, "Workload"), ("GC", 2.0, 3.5, "2 induced loh")]
    assert shown(1) == [
        ("Exception", 1.0, None, "System.InvalidOperationException"),
        ("Catch", 1.1, None, "ProfTest.Program.Main"),
    ]
    gc = doc["threads"][0]["markers"]
    assert doc["meta"]["categories"][gc["category"][1]]["name"] == "GC"


def test_no_markers_without_a_timeline() -> None:
    profile = sample_profile()
    profile.spans.clear()
    profile.metadata["clr_events"] = [[1_000_000, profile.threads[0].thread_id, "exception", "E"]]
    doc = json.loads(gecko.write(profile))
    check(doc)
    assert all(t["markers"]["length"] == 0 for t in doc["threads"])


def test_timeline_weights_are_the_trees_times_when_the_clock_says_more() -> None:
    """Spans are the clock's; the tree has the profiler's cost per call taken out. The
    call tree (weights) must say the tree's times, the stack chart (times) the clock's."""
    profile = sample_profile()
    clock = json.loads(gecko.write(profile))["threads"][0]["samples"]
    # 10% of profiler cost in every span, as the clock saw it
    profile.spans[:] = [
        Span(s.thread, s.frame, s.start_ns * 11 // 10, s.end_ns * 11 // 10, s.depth)
        for s in profile.spans
    ]
    doc = json.loads(gecko.write(profile))
    check(doc)
    assert self_by_path(doc, 0) == tree_self(profile, 0, 1e-6)
    samples = doc["threads"][0]["samples"]
    assert samples["time"] == [round(t * 1.1, 6) for t in clock["time"]]

"""Memory profiles in reports and exports: the three views (``--metric``), bytes where time
would be, and pprof/speedscope units; malformed views refused with one line."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree import file as profile_file
from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.errors import UsageError
from profkit.export import pprof, speedscope
from profkit.profilers.memory import tree_of
from profkit.report._fmt import format_bytes
from profkit.report.metric import memory_view
from profkit.report.text import render_tree
from tests.export.test_formats import _decode_pprof

MiB = 1024 * 1024


def memory_profile() -> CallProfile:
    profile = CallProfile("memory")
    main = profile.frame_id(Frame("app.main", "app.py", 1))
    load = profile.frame_id(Frame("app.load", "app.py", 5))
    parse = profile.frame_id(Frame("app.parse", "app.py", 9))
    root = tree_of([((main, load), 10, 30 * MiB), ((main, parse), 4, 10 * MiB)])
    profile.threads.append(ThreadTree(1, "MainThread", root))
    profile.metadata.update(
        metric="alloc_bytes",
        unit="bytes",
        alloc_sample_bytes=512 * 1024,
        allocated_bytes=40 * MiB,
        peak_bytes=12 * MiB,
        leaked_bytes=2 * MiB,
        memory_views={
            "peak": [[[main, load], 3, 8 * MiB], [[main, parse], 2, 4 * MiB]],
            "leaked": [[[main, parse], 1, 2 * MiB]],
        },
    )
    return profile


def test_format_bytes() -> None:
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1024) == "1.00 KiB"
    assert format_bytes(30 * MiB) == "30.0 MiB"
    assert format_bytes(5 * 1024**3) == "5.00 GiB"


def test_the_tree_shows_bytes_of_the_chosen_view() -> None:
    profile = memory_profile()
    text = render_tree(profile, width=None)
    assert "40.0 MiB allocated" in text and "30.0 MiB" in text and " ms" not in text
    peak = render_tree(memory_view(profile, "peak"), width=None)
    assert "12.0 MiB alive at the peak" in peak and "8.00 MiB" in peak
    leaked = memory_view(profile, "leaked")
    assert leaked.threads[0].root.inclusive_ns == 2 * MiB
    assert "app.load" not in render_tree(leaked, width=None)
    assert memory_view(profile, "alloc") is profile


def test_a_time_profile_has_no_peak_view() -> None:
    profile = CallProfile("sample")
    with pytest.raises(UsageError, match="needs a memory profile"):
        memory_view(profile, "peak", "t.json")


def _mutations() -> st.SearchStrategy[Any]:
    junk = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**64), 2**64),
        st.floats(allow_nan=True),
        st.text(max_size=3),
        st.lists(st.integers(-2, 5), max_size=4),
    )
    return st.tuples(st.sampled_from(["peak", "leaked"]), st.integers(0, 2), junk)


@settings(max_examples=200, deadline=None)
@given(_mutations())
def test_a_malformed_view_is_a_usage_error_never_a_crash(mutation: tuple[str, int, Any]) -> None:
    view, field, junk = mutation
    profile = memory_profile()
    meta = copy.deepcopy(profile.metadata)
    rows = meta["memory_views"][view]
    rows[0] = list(rows[0])
    rows[0][field] = junk
    profile.metadata = meta
    try:
        out = memory_view(profile, view)
    except UsageError as exc:
        assert "memory_views" in str(exc)
    else:  # the junk happened to be a valid value
        assert out.threads[0].root.inclusive_ns >= 0


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 2), min_size=1, max_size=4),
            st.integers(0, 1000),
            st.integers(0, 2**40),
        ),
        max_size=6,
    )
)
def test_views_round_trip_through_the_file(rows: list[tuple[list[int], int, int]]) -> None:
    profile = memory_profile()
    profile.metadata["memory_views"]["peak"] = [[s, n, b] for s, n, b in rows]
    again = profile_file.loads(json.dumps(profile_file.to_json(profile)).encode())
    view = memory_view(again, "peak")
    assert sum(t.root.inclusive_ns for t in view.threads) == sum(b for _, _, b in rows)


def test_pprof_carries_alloc_space_and_inuse_space() -> None:
    profile = memory_profile()
    out = _decode_pprof(pprof.write(profile))
    assert out["types"] == [("samples", "count"), ("alloc_space", "bytes")]
    assert out["default"] == "alloc_space"
    assert sum(v[1] for _, _, v in out["samples"]) == 40 * MiB
    peak = _decode_pprof(pprof.write(memory_view(profile, "peak")))
    assert peak["types"][1] == ("inuse_space", "bytes")
    assert sum(v[1] for _, _, v in peak["samples"]) == 12 * MiB


def test_speedscope_says_bytes() -> None:
    doc = json.loads(speedscope.write(memory_profile()))
    assert {p["unit"] for p in doc["profiles"]} == {"bytes"}


def test_report_metric_flag(tmp_path: Path) -> None:
    path = tmp_path / "mem.json"
    profile_file.save(memory_profile(), str(path))
    run = [sys.executable, "-m", "profkit", "report"]
    out = subprocess.run(
        [*run, "--metric", "leaked", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "2.00 MiB alive at the end" in out.stdout
    time_profile = CallProfile("sample")
    time_profile.threads.append(ThreadTree(1, "MainThread", tree_of([((), 1, 5)])))
    other = tmp_path / "time.json"
    profile_file.save(time_profile, str(other))
    bad = subprocess.run(
        [*run, "--metric", "peak", str(other)], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "memory profile" in bad.stderr

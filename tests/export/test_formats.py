"""Each export format parsed back and checked against the profile it came from."""

from __future__ import annotations

import gzip
import json
import pstats
from collections import defaultdict
from pathlib import Path

from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.export import chrome, collapsed, pprof, speedscope
from profkit.export import html as html_export
from profkit.export import pstats as pstats_export
from tests.calltree.strategies import deep_profile, sample_profile
from tests.export import protobuf


def _no_spans() -> CallProfile:
    p = sample_profile()
    p.spans.clear()
    return p


# ---------------------------------------------------------------- collapsed


def test_collapsed_lines_are_self_times_per_path() -> None:
    text = collapsed.write(sample_profile()).decode()
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines())
    assert lines["thread_MainThread;myapp.main;myapp.core.work;json.dumps"] == "4000000"
    assert lines["thread_MainThread;myapp.main"] == "1000000"
    assert lines["thread_worker;myapp.core.helper"] == "2000000"
    assert sum(int(v) for v in lines.values()) == 12_000_000


def test_collapsed_single_thread_and_odd_names() -> None:
    p = CallProfile("trace")
    t = ThreadTree(1, "T")
    p.threads.append(t)
    t.root.child(p.frame_id(Frame("a;b c\nd"))).add_call(5, 5)
    assert collapsed.write(p) == b"a:b_c_d 5\n"


# ---------------------------------------------------------------- speedscope

_UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def _check_speedscope(doc: dict) -> None:
    """The required fields of speedscope's file-format-schema.json, and balanced events."""
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    assert 0 <= doc.get("activeProfileIndex", 0) < max(len(doc["profiles"]), 1)
    for prof in doc["profiles"]:
        assert prof["type"] in ("evented", "sampled")
        assert isinstance(prof["name"], str) and prof["unit"] in _UNITS
        assert prof["endValue"] >= prof["startValue"]
        if prof["type"] == "evented":
            stack: list[int] = []
            last = prof["startValue"]
            for ev in prof["events"]:
                assert ev["at"] >= last and 0 <= ev["frame"] < len(frames)
                last = ev["at"]
                if ev["type"] == "O":
                    stack.append(ev["frame"])
                else:
                    assert ev["type"] == "C" and stack.pop() == ev["frame"]
            assert not stack and last <= prof["endValue"]
        else:
            assert len(prof["samples"]) == len(prof["weights"])
            assert all(0 <= i < len(frames) for s in prof["samples"] for i in s)


def test_speedscope_evented_from_spans() -> None:
    doc = json.loads(speedscope.write(sample_profile()))
    _check_speedscope(doc)
    main = doc["profiles"][0]
    assert main["type"] == "evented"
    assert [e["type"] for e in main["events"]].count("O") == 8
    assert main["startValue"] == 0 and main["endValue"] == 10_000_000


def _self_by_stack(prof: dict, names: list[str]) -> dict[tuple[str, ...], int]:
    """Replay evented open/close events: self time per stack (root first)."""
    out: dict[tuple[str, ...], int] = defaultdict(int)
    stack: list[list[int]] = []  # [frame, opened at, time in children]
    for ev in prof["events"]:
        if ev["type"] == "O":
            stack.append([ev["frame"], ev["at"], 0])
            continue
        frame, start, inner = stack.pop()
        key = (*(names[f] for f, _, _ in stack), names[frame])
        out[key] += ev["at"] - start - inner
        if stack:
            stack[-1][2] += ev["at"] - start
    return dict(out)


def test_speedscope_evented_from_tree() -> None:
    """No timeline: the tree laid out as one, linear in its size (``sampled`` repeated the
    whole stack in every sample: quadratic in depth)."""
    doc = json.loads(speedscope.write(_no_spans()))
    _check_speedscope(doc)
    prof = doc["profiles"][0]
    assert prof["type"] == "evented"
    names = [f["name"] for f in doc["shared"]["frames"]]
    stacks = _self_by_stack(prof, names)
    assert stacks[("myapp.main", "myapp.core.work", "json.dumps")] == 4_000_000  # root first
    assert sum(stacks.values()) == 10_000_000 == prof["endValue"]


def test_speedscope_frames_carry_only_name_file_line() -> None:
    doc = json.loads(speedscope.write(sample_profile()))
    frames = doc["shared"]["frames"]
    assert all(set(f) <= {"name", "file", "line"} for f in frames)
    assert len({json.dumps(f, sort_keys=True) for f in frames}) == len(frames)


def test_speedscope_clips_untidy_spans() -> None:
    p = sample_profile()
    from profkit.calltree.model import Span

    p.spans.append(Span(0, 1, 9_000_000, 12_000_000, 1))  # ends after its parent
    _check_speedscope(json.loads(speedscope.write(p)))


def test_speedscope_deep_profile() -> None:
    _check_speedscope(json.loads(speedscope.write(deep_profile(1500))))


# ---------------------------------------------------------------- chrome


def _check_chrome(doc: dict) -> list[dict]:
    events = doc["traceEvents"]
    for e in events:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["name"], str)
    return [e for e in events if e["ph"] == "X"]


def test_chrome_from_spans() -> None:
    doc = json.loads(chrome.write(sample_profile()))
    xs = _check_chrome(doc)
    assert len(xs) == 9
    main = next(e for e in xs if e["name"] == "myapp.main")
    assert (main["ts"], main["dur"], main["pid"], main["tid"]) == (0, 10_000, 4242, 1)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"MainThread", "worker"}
    (proc,) = [e for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert proc["args"]["name"] == "app.py" and proc["pid"] == 4242


def test_chrome_synthesised_from_tree_nests() -> None:
    xs = _check_chrome(json.loads(chrome.write(_no_spans())))
    assert all(e["args"]["synthetic"] for e in xs)
    work = next(e for e in xs if e["name"] == "myapp.core.work")
    kids = [
        e
        for e in xs
        if e["name"] in ("json.dumps", "myapp.core.helper")
        and e["tid"] == 1
        and work["ts"] <= e["ts"] < work["ts"] + work["dur"]
    ]
    assert sum(k["dur"] for k in kids) <= work["dur"]
    assert work["dur"] == 8000


# ---------------------------------------------------------------- pstats


def test_pstats_loads_with_pstats_stats(tmp_path: Path) -> None:
    path = tmp_path / "p.pstats"
    path.write_bytes(pstats_export.write(sample_profile()))
    st = pstats.Stats(str(path))
    key = ("/src/myapp/core.py", 20, "myapp.core.work")
    cc, nc, tt, ct, callers = st.stats[key]  # type: ignore[attr-defined]
    assert (cc, nc) == (2, 2)
    assert (round(tt, 6), round(ct, 6)) == (0.002, 0.008)
    assert callers == {("/src/myapp/__init__.py", 10, "myapp.main"): (2, 2, 0.002, 0.008)}
    helper = st.stats[("/src/myapp/core.py", 40, "myapp.core.helper")]  # type: ignore[attr-defined]
    assert helper[1] == 2 and round(helper[3], 6) == 0.004  # both threads
    assert st.total_calls == 7  # type: ignore[attr-defined]
    st.sort_stats("cumulative").print_stats(3)  # snakeviz uses these same calls
    st.print_callers("work")


def test_pstats_recursion_counts_outermost_only(tmp_path: Path) -> None:
    path = tmp_path / "p.pstats"
    path.write_bytes(pstats_export.write(deep_profile(50)))
    st = pstats.Stats(str(path))
    cc, nc, _tt, ct, callers = st.stats[("r.py", 1, "myapp.rec")]  # type: ignore[attr-defined]
    assert (cc, nc) == (1, 50) and round(ct * 1e9) == 50
    assert callers[("r.py", 1, "myapp.rec")][:2] == (49, 1)  # nc/cc, as cProfile orders them


# ---------------------------------------------------------------- pprof


def _decode_pprof(raw: bytes) -> dict:
    msg = protobuf.fields(gzip.decompress(raw))
    strings = [s.decode() for s in msg[6]]  # type: ignore[union-attr]
    assert strings[0] == ""
    functions = {}
    for f in msg[5]:
        fm = protobuf.fields(f)  # type: ignore[arg-type]
        functions[protobuf.one(fm, 1)] = (
            strings[protobuf.one(fm, 2)],
            strings[protobuf.one(fm, 4)],
            protobuf.one(fm, 5),
        )
    locations = {}
    for loc in msg[4]:
        lm = protobuf.fields(loc)  # type: ignore[arg-type]
        (line,) = lm[4]
        locations[protobuf.one(lm, 1)] = functions[protobuf.one(protobuf.fields(line), 1)][0]  # type: ignore[arg-type]
    types = [tuple(strings[protobuf.one(protobuf.fields(v), n)] for n in (1, 2)) for v in msg[1]]  # type: ignore[arg-type]
    samples = []
    for s in msg[2]:
        sm = protobuf.fields(s)  # type: ignore[arg-type]
        stack = [locations[i] for i in protobuf.packed(sm[1])]
        label = protobuf.fields(sm[3][0])  # type: ignore[arg-type]
        thread = strings[protobuf.one(label, 2)]
        assert strings[protobuf.one(label, 1)] == "thread"
        samples.append((thread, tuple(reversed(stack)), tuple(protobuf.packed(sm[2]))))
    return {
        "types": types,
        "samples": samples,
        "functions": functions,
        "default": strings[protobuf.one(msg, 14)],
        "duration": protobuf.one(msg, 10),
    }


def test_pprof_decodes_back() -> None:
    out = _decode_pprof(pprof.write(sample_profile()))
    assert out["types"] == [("calls", "count"), ("time", "nanoseconds")]
    assert out["default"] == "time"
    samples = {(t, s): v for t, s, v in out["samples"]}
    assert samples[("MainThread", ("myapp.main", "myapp.core.work", "json.dumps"))] == (
        1,
        4_000_000,
    )
    assert samples[("worker", ("myapp.core.helper",))] == (1, 2_000_000)
    assert sum(v[1] for v in samples.values()) == 12_000_000
    assert ("myapp.core.work", "/src/myapp/core.py", 20) in out["functions"].values()
    assert out["duration"] == 10_000_000


def test_pprof_out_of_range_metadata_is_left_out() -> None:
    """metadata start_time_ns/interval_ns of 2**70 were cut to 64 bits (wrong, negative
    int64 values) in time_nanos/period."""
    profile = sample_profile()
    profile.metadata.update(start_time_ns=2**70, interval_ns=2**64 + 5)
    msg = protobuf.fields(gzip.decompress(pprof.write(profile)))
    assert 9 not in msg and protobuf.one(msg, 12) == 1
    profile.metadata.update(start_time_ns=1_700_000_000_000_000_000, interval_ns=1_000_000)
    msg = protobuf.fields(gzip.decompress(pprof.write(profile)))
    assert (protobuf.one(msg, 9), protobuf.one(msg, 12)) == (1_700_000_000_000_000_000, 1_000_000)


def test_pprof_varint() -> None:
    for value in (0, 1, 127, 128, 300, 2**32, 2**63 - 1):
        assert protobuf.read_varint(pprof.varint(value), 0) == (value, len(pprof.varint(value)))
    assert len(pprof.varint(-1)) == 10


# ---------------------------------------------------------------- html


def test_html_is_self_contained_and_escapes_script() -> None:
    p = sample_profile()
    p.frames[2] = Frame("</script><script>alert(1)</script>", "x.py", 1)
    page = html_export.write(p).decode()
    assert page.count("</script>") == 2  # the data element's and the code's own
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page
    start = page.index('id="profkit-data">') + len('id="profkit-data">')
    doc = json.loads(page[start : page.index("</script>", start)])
    assert "</script><script>alert(1)</script>" in doc["names"]
    counts: defaultdict[str, int] = defaultdict(int)
    for t in doc["threads"]:
        for row in t["nodes"][1:]:
            counts[doc["names"][row[1]]] += row[4]
    assert counts["myapp.core.work"] == 2


def test_empty_profile_exports_loadable_files(tmp_path: Path) -> None:
    from profkit.export import registry

    empty = CallProfile("sample")
    for fmt in registry.EXPORTS:
        registry.export(empty, fmt.name, tmp_path / ("e" + fmt.extension))
    assert pstats.Stats(str(tmp_path / "e.pstats")).total_calls == 0  # type: ignore[attr-defined]
    _check_speedscope(json.loads((tmp_path / "e.speedscope.json").read_bytes()))
    assert _decode_pprof((tmp_path / "e.pb.gz").read_bytes())["samples"] == []

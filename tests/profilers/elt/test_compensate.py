"""Compensation for the profiler's own cost per call (elt/compensate.py, elt/calibrate.py).

The row arithmetic on hand-made trees (exact numbers) and on generated ones (the tree's
invariants hold after it, and the C code gives the numbers of the rule written in Python
here, :func:`_model`), the calibration's reading of its thread's rows, and end to end:
``profkit run`` calibrates, compensates, says so in the metadata, and leaves no trace of
the calibration in the profile or in the program (its thread names, its output).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from array import array
from operator import floordiv, mul, sub
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree.file import load
from profkit.profilers.elt import flat, native
from profkit.profilers.elt.calibrate import Calibration, Costs
from profkit.profilers.elt.compensate import compensate_rows


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """Once, not on both hot paths (the conftest's): the rows are the C recorder's, and the
    whole runs pick their path by their own flags."""
    return "native"


COLS = 8
ZERO = Costs(0.0, 0.0, 0.0, 0.0)
needs_c = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")


def _rows(nodes: list[tuple[int, int, int, int, int, int, int]]) -> bytes:
    """(parent, frame, calls, incl, excl, min, max) rows in pre-order -> export_flat's
    bytes, with each row's subtree size (the C code finds children by it)."""
    sizes = [1] * len(nodes)
    for i in range(len(nodes) - 1, 0, -1):
        sizes[nodes[i][0]] += sizes[i]
    return bytes(flat.pack([(*row, size) for row, size in zip(nodes, sizes, strict=True)]))


def _compensated(data: bytes, costs: Costs, c_frames: set[int]) -> bytes:
    rows = bytearray(data)
    compensate_rows(rows, costs, c_frames)
    return bytes(rows)


def _model(data: bytes, costs: Costs, c_frames: set[int]) -> bytes:
    """The rule as compensate.py states it, in Python (its column-at-a-time version)."""
    _parent, _frame, _calls, _incl, _excl, _min, _max = range(7)
    rows = array("q", [v for row in flat.unpack(data) for v in row])  # row after row
    n = len(rows) // COLS
    if n <= 1:
        return data
    frames = rows[COLS + _frame :: COLS]
    parents = rows[COLS + _parent :: COLS]
    calls = rows[COLS + _calls :: COLS]
    py_in, py_out = round(costs.python_callee), round(costs.python_caller)
    cost_in: dict[int, int] = dict.fromkeys(frames, py_in)
    cost_out: dict[int, int] = dict.fromkeys(frames, py_out)
    for frame in c_frames:
        if frame in cost_in:
            cost_in[frame], cost_out[frame] = round(costs.c_callee), round(costs.c_caller)
    own = [0, *map(sub, rows[COLS + _excl :: COLS], map(mul, calls, map(cost_in.get, frames)))]
    outs = list(map(mul, calls, map(cost_out.get, frames)))
    excl = [0] * n
    incl = [0] * n
    for at, p, out in zip(range(n - 1, 0, -1), reversed(parents), reversed(outs), strict=True):
        e = max(own[at], 0)
        excl[at] = e
        e += incl[at]
        incl[at] = e
        incl[p] += e
        own[p] -= out
    new = incl[1:]
    old = [v or 1 for v in rows[COLS + _incl :: COLS]]
    for column in (_min, _max):
        values = rows[COLS + column :: COLS]
        rows[COLS + column :: COLS] = array("q", map(floordiv, map(mul, values, new), old))
    rows[COLS + _excl :: COLS] = array("q", excl[1:])
    rows[COLS + _incl :: COLS] = array("q", new)
    rows[_incl] = incl[0]
    return bytes(flat.pack([tuple(rows[i : i + COLS]) for i in range(0, len(rows), COLS)]))


def _table(data: bytes) -> list[list[int]]:
    return [list(row[: COLS - 1]) for row in flat.unpack(data)]


@needs_c
def test_costs_land_on_the_callee_and_its_caller() -> None:
    # root -> A (Python, 10 calls) -> B (C, 100 calls); A -> D (Python, 5 calls)
    data = _rows(
        [
            (-1, -1, 0, 1500, 0, 0, 0),
            (0, 0, 10, 1500, 400, 100, 200),
            (1, 7, 100, 600, 600, 4, 10),
            (1, 1, 5, 500, 500, 50, 150),
        ]
    )
    costs = Costs(python_callee=5, python_caller=3, c_callee=2, c_caller=1)
    root, a, b, d = _table(_compensated(data, costs, {7}))
    # A: 400 - 10*5 (its own calls) - 100*1 (B's caller cost) - 5*3 (D's)
    assert a[4] == 235
    assert b[4] == b[3] == 600 - 100 * 2
    assert d[4] == d[3] == 500 - 5 * 5
    assert a[3] == 235 + 400 + 475
    assert root[3] == a[3] and root[4] == 0
    # the shortest and longest call shrink with the inclusive time
    assert b[5:7] == [4 * 400 // 600, 10 * 400 // 600]
    assert a[2] == 10 and b[2] == 100  # calls untouched


@needs_c
def test_never_below_zero() -> None:
    data = _rows(
        [(-1, -1, 0, 100, 0, 0, 0), (0, 0, 1000, 100, 60, 0, 5), (1, 1, 1000, 40, 40, 0, 1)]
    )
    out = _table(_compensated(data, Costs(10, 10, 10, 10), set()))
    assert [r[4] for r in out[1:]] == [0, 0]
    assert [r[3] for r in out] == [0, 0, 0]


@needs_c
def test_zero_costs_change_nothing() -> None:
    data = _rows([(-1, -1, 0, 10, 0, 0, 0), (0, 0, 1, 10, 4, 10, 10), (1, 1, 2, 6, 6, 3, 3)])
    assert _compensated(data, ZERO, set()) == data


@needs_c
def test_rows_that_are_not_a_tree_are_refused_untouched() -> None:
    """A subtree size past the rows: ValueError, and the rows as they were."""
    rows = bytearray(_rows([(-1, -1, 0, 10, 0, 0, 0), (0, 0, 1, 10, 4, 10, 10)]))
    flat.column(rows, "size")[1] = 5  # row 1's size: 5 rows from row 1, of 2
    before = bytes(rows)
    with pytest.raises(ValueError, match="subtree size"):
        compensate_rows(rows, Costs(1, 1, 1, 1), set())
    assert rows == before


@st.composite
def _trees(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(1, 40))
    parents = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    # pre-order: a node's parent must be an ancestor-or-self of the previous node
    fixed = [-1]
    for i in range(1, n):
        chain, p = [], i - 1
        while p >= 0:
            chain.append(p)
            p = fixed[p]
        fixed.append(chain[parents[i] % len(chain)])
    scale = draw(st.sampled_from([1, 1, 1, 2**13]))  # 2**13: calls of 4.29 s and more
    excl = [0] + [draw(st.integers(0, 10**6)) * scale for _ in range(1, n)]
    incl = excl[:]
    for i in range(n - 1, 0, -1):
        if fixed[i] > 0:
            incl[fixed[i]] += incl[i]
    calls = [0] + [draw(st.integers(0, 1000)) for _ in range(1, n)]
    frames = [-1] + [draw(st.integers(0, 5)) for _ in range(1, n)]
    root = sum(incl[i] for i in range(1, n) if fixed[i] == 0)
    rows = [(-1, -1, 0, root, 0, 0, 0)]
    rows += [
        (fixed[i], frames[i], calls[i], incl[i], excl[i], incl[i] // 3, incl[i])
        for i in range(1, n)
    ]
    return _rows(rows)


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    _trees(),
    st.lists(st.floats(0, 500), min_size=4, max_size=4),
    st.sets(st.integers(0, 6), max_size=4),
)
def test_the_c_rule_is_the_python_rule(data: bytes, values: list[float], c: set[int]) -> None:
    """Number for number (whole nanoseconds; costs rounded as Python rounds), in rows
    whose shortest and longest calls fit 32 bits or not (flatrows.h's wide rows)."""
    got, model = _compensated(data, Costs(*values), c), _model(data, Costs(*values), c)
    assert flat.unpack(got) == flat.unpack(model)


@needs_c
def test_a_min_and_max_that_outgrow_32_bits_get_a_wide_row() -> None:
    """A caller shorter than its callee (a clock that went back): its inclusive time grows
    to the callee's, and its shortest and longest call with it, past 32 bits. The rows
    grow by the row's wide entry, in row order among the others; the numbers are the
    rule's."""
    data = _rows(
        [
            (-1, -1, 0, 2**32 - 10, 0, 0, 0),
            (0, 0, 1, 2**32 - 10, 0, 2**32 - 10, 2**32 - 10),
            (1, 1, 1, 2**33, 2**33, 2**33, 2**33),
            (1, 2, 3, 1, 1, 0, 2**32 - 2),
        ]
    )
    assert flat.counts(data) == (4, 1)
    got = _compensated(data, ZERO, set())
    assert flat.counts(got) == (4, 2)
    assert list(flat.wide_column(got, "row")) == [1, 2]
    assert flat.unpack(got) == flat.unpack(_model(data, ZERO, set()))
    assert flat.unpack(got)[1][2:7] == (1, 2**33 + 1, 0, 2**33 + 1, 2**33 + 1)


@needs_c
@settings(max_examples=200, deadline=None)
@given(_trees(), st.lists(st.floats(0, 500), min_size=4, max_size=4))
def test_the_tree_stays_a_tree(data: bytes, values: list[float]) -> None:
    before, after = _table(data), _table(_compensated(data, Costs(*values), {0, 3}))
    children: dict[int, int] = {}
    for row in after[1:]:
        if row[0] > 0:
            children[row[0]] = children.get(row[0], 0) + row[3]
    for i, (old, new) in enumerate(zip(before, after, strict=True)):
        assert new[:3] == old[:3]  # parent, frame, calls
        if i == 0:
            continue
        assert 0 <= new[4] <= old[4]
        assert new[3] <= old[3]
        assert new[3] == new[4] + children.get(i, 0)
    assert after[0][3] == sum(r[3] for r in after[1:] if r[0] == 0)


def test_calibration_reads_its_rows() -> None:
    cal = Calibration(calls=100, repeats=2)
    cal.bare = {"py": 1000, "c": 2000}
    cal.profiled = {("py", 0): 9000, ("py", 1): 8000, ("c", 0): 5000, ("c", 1): 7000}
    names = {10: "py_0", 11: "py_1", 12: "c_0", 13: "c_1", 14: "e0", 15: "e1"}
    names.update({20: "builtins.len", 21: "builtins.id"})
    rows = [
        (-1, -1, 0, 0, 0, 0, 0, 1),
        (0, 10, 1, 9000, 0, 0, 0, 1),
        (1, 14, 50, 1500, 0, 0, 0, 1),
        (1, 15, 50, 1500, 0, 0, 0, 1),
        (0, 11, 1, 8000, 0, 0, 0, 1),
        (4, 14, 50, 1000, 0, 0, 0, 1),
        (4, 15, 50, 1000, 0, 0, 0, 1),
        (0, 12, 1, 5000, 0, 0, 0, 1),
        (7, 20, 100, 1200, 0, 0, 0, 1),
        (0, 13, 1, 7000, 0, 0, 0, 1),
        (9, 21, 100, 9000, 0, 0, 0, 1),
    ]
    values = [v for row in rows for v in row]
    costs = cal.costs(values, 8, names.__getitem__)
    # the least disturbed repetition (least wall time) of each: py_1, c_0
    assert costs == Costs(
        python_callee=20.0, python_caller=(8000 - 1000) / 100 - 20, c_callee=12.0, c_caller=18.0
    )


def test_calibration_without_recorded_python_calls() -> None:
    cal = Calibration(calls=100, repeats=1)
    cal.bare = {"py": 1, "c": 1}
    assert cal.costs([-1, -1, 0, 0, 0, 0, 0, 1], 8, str) is None


PROGRAM = textwrap.dedent(
    """
    import threading

    def leaf(i):
        return i + 1

    def work(n):
        return sum(leaf(i) for i in range(n)) + len(str(n))

    t = threading.Thread(target=work, args=(1000,))
    t.start(); t.join()
    print(t.name, threading.active_count(), work(20000))
    """
)


def _run(tmp_path: Path, *flags: str) -> tuple[str, dict[str, object], list[str], list[str]]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "p.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", *flags, "-o", str(out), str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # --stream events.txt
        env=env,
        timeout=120,
        check=True,
    )
    profile = load(out)
    names = [f.name for f in profile.frames]
    return proc.stdout, profile.metadata["compensation"], names, [t.name for t in profile.threads]


@pytest.mark.skipif(not native.available(), reason="the C recorder is not built")
def test_profkit_run_compensates_by_default(tmp_path: Path) -> None:
    bare = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    stdout, meta, names, threads = _run(tmp_path)
    assert stdout == bare  # "Thread-1 1 ...": the calibration's thread is not counted
    assert meta["applied"] is True, meta
    costs = meta["cost_per_call_ns"]
    assert isinstance(costs, dict) and costs["python_callee"] > 0
    assert json.loads(json.dumps(meta)) == meta
    assert not any("calibration" in n or n.endswith(("py_0", ".e0")) for n in names)
    # the frames only the calibration's thread used are gone too (the program calls
    # len, not abs or callable); the others are numbered anew
    assert "builtins.len" in names and not {"builtins.abs", "builtins.callable"} & set(names)
    assert "profkit-calibration" not in threads and len(threads) == 2


@pytest.mark.skipif(not native.available(), reason="the C recorder is not built")
def test_no_compensate_keeps_recorded_times(tmp_path: Path) -> None:
    _, meta, _, _ = _run(tmp_path, "--no-compensate")
    assert meta == {"applied": False, "why": "turned off (--no-compensate, PROFKIT_COMPENSATE=0)"}


@pytest.mark.skipif(not native.available(), reason="the C recorder is not built")
@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (("--native", "off"), "the pure Python recorder is not calibrated"),
        (("--stream", "events.txt"), "event lines are on"),
        (("--basetime", "1ms"), "the base time cuts the calibration's calls"),
        # shorter than any call: every calibration call kept, as a busy machine once kept
        # slow ones past 1 ms (and compensated 4 ms a call)
        (("--basetime", "1ns"), "the base time cuts the calibration's calls"),
    ],
    ids=["pure-python", "event-lines", "basetime", "basetime-shorter-than-calls"],
)
def test_the_metadata_says_why_times_are_as_recorded(
    tmp_path: Path, flags: tuple[str, ...], why: str
) -> None:
    _, meta, _, _ = _run(tmp_path, *flags)
    assert meta["applied"] is False and str(meta["why"]).startswith(why), meta


@pytest.mark.skipif(not native.available(), reason="the C recorder is not built")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
def test_a_program_that_forks_at_once_sees_one_thread(tmp_path: Path) -> None:
    """The calibration's thread is gone, OS thread and all, before the program starts:
    3.12+ warns on fork() in a multi-threaded process (it counts /proc/self/stat's)."""
    script = tmp_path / "forks.py"
    script.write_text(
        "import os, warnings\nwarnings.simplefilter('always')\npid = os.fork()\n"
        "if pid:\n    os.waitpid(pid, 0)\nelse:\n    os._exit(0)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    out = tmp_path / "p.json"
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert "multi-threaded" not in proc.stderr, proc.stderr
    meta = load(out).metadata["compensation"]
    assert meta["applied"] is True, meta

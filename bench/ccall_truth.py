"""Which functions really take the time of a program: an oracle for self-time rankings.

Issue #11 asks that profkit's flat report rank ``TextIOWrapper.write`` among the top three by
self time on ``python -m json.tool``. Tracing profilers add a cost to every call they record,
and where that cost lands (in the callee's and the caller's self time) shifts the ranking, so
neither profkit nor cProfile can settle it. This runs the program *unprofiled* under ``perf``
(``python -X perf``, 3.12+: CPython's perf trampoline names Python frames; DWARF call
graphs), and charges each sample by cProfile's rules: to the C function that cProfile would
report when one is on the stack above the innermost Python frame (``TextIOWrapper.write``,
``isinstance``...: ``C_FUNCS``), else to that Python function. Then cProfile, profkit (its
times as recorded: ``--no-compensate``) and profkit compensated (the calibrated cost per call
taken out, the default) run the same program in the same session; the rankings are printed
side by side as shares of the run, with two agreement scores against perf's: Spearman's rho
over perf's top ten (1.0: the same order), and the sum of absolute share differences over
them (0: the same shares).

Scenarios:

* ``json`` (default): ``python -m json.tool in.json out.json`` on 8 MB, output to a file.
* ``--tty``: the same with the output on a terminal (a pty, drained by this script), as a
  new user's first try prints it: a line-buffered ``TextIOWrapper`` writes (a syscall) per
  line, so ``TextIOWrapper.write`` really is the hot spot.
* ``--program sympy``: elt_bench's sympy work (simplify, integrate, factor), compared by
  Python function only (a C function's time is its Python caller's in every column: perf
  names only the few C functions of ``C_FUNCS``): "no worse on sympy-like code".

    python bench/ccall_truth.py                      # this interpreter (3.12+), 8 MB
    python bench/ccall_truth.py --python .venvs/py3.13/bin/python --tty
    python bench/ccall_truth.py --program sympy --repeat 3

Needs ``perf`` (linux-perf) and permission to record (``perf_event_paranoid`` <= 2).
Python 3.11 has no ``-X perf``, and there is no unprofiled column: perf alone cannot name
Python frames there, and ``py-spy record --native`` (tried) is no oracle for this question:
it leaves CPython's own C functions out of its stacks (``TextIOWrapper.write`` shows only as
libc's ``write`` on the rare flush, its encoding work as ``dump``'s), and it stops the
program for every native unwind (``raw_decode`` came out at 39 %, perf says 16 % on 3.12).
perf counts time on the CPU, profilers wall time: where the program waits (a terminal that
reads slower than it writes) the wall-time column adds the waiting to ``write``.
"""

from __future__ import annotations

import argparse
import collections
import os
import pstats
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from elt_bench import REAL_PROGRAMS, _json_input  # the real-programs section's inputs

#: CPython's C symbol -> the name cProfile and profkit give that C function.
C_FUNCS = {
    "_io_TextIOWrapper_write": "TextIOWrapper.write",
    "_io_TextIOWrapper_read": "TextIOWrapper.read",
    "builtin_isinstance": "builtins.isinstance",
    "PyObject_IsInstance": "builtins.isinstance",
    "py_encode_basestring_ascii": "_json.encode_basestring_ascii",
    "builtin_id": "builtins.id",
    "dict_items": "dict.items",
}
_C_NAMES = frozenset(C_FUNCS.values())
TOP = 10
#: The unprofiled run's column (perf, 3.12+).
TRUTH = "unprofiled"


def _samples(script: str) -> Iterator[list[str]]:
    """Each sample's symbols, leaf first, from ``perf script`` output."""
    frames: list[str] = []
    for line in script.splitlines():
        if not line.strip():
            if frames:
                yield frames
            frames = []
        elif line[0] in "\t ":
            parts = line.split(None, 1)
            if len(parts) == 2:
                frames.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1].rsplit(" (", 1)[0]))
    if frames:
        yield frames


def _short(name: str) -> str:
    """A C function as ``Type.method`` (``builtins.isinstance``), a Python one by its own
    name: cProfile's rows carry no qualified names."""
    if name in _C_NAMES:
        return name
    return name.rsplit(".", 1)[-1]


class Scenario:
    """One program, where its output goes, and how functions are compared."""

    def __init__(self, program: list[str], *, tty: bool, python_only: bool) -> None:
        self.program = program
        self.tty = tty
        #: fold every C function into its Python caller (perf names only C_FUNCS)
        self.python_only = python_only

    def run(self, cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
        """``cmd`` to the end, its stdout a pty (drained here) or discarded; its (wall,
        CPU) seconds."""
        if not self.tty:
            return _timed(cmd, subprocess.DEVNULL, env)
        master, slave = os.openpty()

        def drain() -> None:
            while True:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # EIO: every writer closed the terminal
                    return
                if not chunk:
                    return

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            return _timed(cmd, slave, env)
        finally:
            os.close(slave)
            reader.join()
            os.close(master)


def _timed(cmd: list[str], stdout: int, env: dict[str, str] | None) -> tuple[float, float]:
    """(wall, CPU) seconds of ``cmd``, the wall time less the time its main thread waited
    for a CPU (``/proc/PID/schedstat``, read from the exited process before it is reaped):
    on a loaded machine that wait is not the program's."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, env=env)
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    wall = time.perf_counter() - start
    try:
        queued = int(Path(f"/proc/{proc.pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        queued = 0.0
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return wall - queued, usage.ru_utime + usage.ru_stime


def off_cpu_to_write(shares: dict[str, float], wall: float, cpu: float) -> dict[str, float]:
    """perf's shares are of time *on the CPU*; a profiler's are of wall time.
    On a terminal the program also waits (the terminal reads slower than it writes), and it
    waits in ``TextIOWrapper.write``: the bare run's wall time beyond its CPU time (and
    beyond its wait for a CPU, see :func:`_timed`) is given to it, the rest keeps its
    shares scaled by CPU / wall."""
    waiting = max(wall - cpu, 0.0) / wall if wall > 0 else 0.0
    out = {name: share * (1 - waiting) for name, share in shares.items()}
    out["TextIOWrapper.write"] = out.get("TextIOWrapper.write", 0.0) + waiting
    return out


def _charge(frames: list[str], python_only: bool) -> str | None:
    """The function one perf sample is charged to (leaf first), by cProfile's rules."""
    inner = next((i for i, f in enumerate(frames) if f.startswith("py::")), None)
    if inner is None:
        return None  # start-up before any Python frame, exit after the last
    named = [] if python_only else [C_FUNCS[f] for f in frames[:inner] if f in C_FUNCS]
    return _short(named[-1] if named else frames[inner][4:].rsplit(":", 1)[0])


def perf_shares(python: str, scenario: Scenario, work: str) -> dict[str, float]:
    data = os.path.join(work, "perf.data")
    record = ["perf", "record", "-q", "-F", "2000", "--call-graph", "dwarf,16384", "-o", data]
    scenario.run([*record, "--", python, "-X", "perf", *scenario.program])
    script = subprocess.run(
        ["perf", "script", "-i", data], check=True, capture_output=True, text=True
    ).stdout
    counts: collections.Counter[str] = collections.Counter()
    for frames in _samples(script):
        name = _charge(frames, scenario.python_only)
        if name is not None:
            counts[name] += 1
    total = sum(counts.values())
    return {name: n / total for name, n in counts.items()}


def _cprofile_name(key: tuple[str, int, str]) -> tuple[str, bool]:
    """(name as the columns show it, is it a C function) of a pstats function key."""
    file, line, name = key
    match = re.match(r"<(?:built-in )?method (?:'(\w+)' of '[\w.]*?(\w+)' objects|([\w.]+))>", name)
    if match:
        name = f"{match[2]}.{match[1]}" if match[1] else match[3]
    return _short(name), file == "~" and line == 0


def cprofile_shares(python: str, scenario: Scenario, work: str) -> dict[str, float]:
    out = os.path.join(work, "c.pstats")
    scenario.run([python, "-m", "cProfile", "-o", out, *scenario.program])
    stats = pstats.Stats(out)
    raw = stats.stats  # type: ignore[attr-defined]
    shares: dict[str, float] = collections.defaultdict(float)
    total = stats.total_tt  # type: ignore[attr-defined]
    for key, (_, _, tt, _, callers) in raw.items():
        shown, is_c = _cprofile_name(key)
        if scenario.python_only and is_c:
            # cProfile keeps a C function's time per caller: give each caller its part
            for caller, row in callers.items():
                shares[_cprofile_name(caller)[0]] += row[2] / total
        else:
            shares[shown] += tt / total
    return shares


def profkit_shares(
    python: str, scenario: Scenario, work: str, compensate: bool
) -> dict[str, float]:
    from profkit.calltree.file import load
    from profkit.calltree.model import CallNode

    out = os.path.join(work, f"p{int(compensate)}.json")
    flag = "--compensate" if compensate else "--no-compensate"
    scenario.run([python, "-m", "profkit", "run", "--no-tree", flag, "-o", out, *scenario.program])
    profile = load(out)
    applied = profile.metadata.get("compensation", {}).get("applied", False)
    if applied != compensate:
        print(f"  (profkit {flag}: compensation applied={applied})")
    shares: dict[str, float] = collections.defaultdict(float)
    total = 0

    def walk(node: CallNode, owner: str) -> None:
        for child in node.children.values():
            frame = profile.frames[child.frame]
            is_c = not frame.file and frame.line == 0
            name = owner if scenario.python_only and is_c and owner else _short(frame.name)
            shares[name] += child.exclusive_ns
            walk(child, name)

    for thread in profile.threads:
        walk(thread.root, "")
        total += sum(c.inclusive_ns for c in thread.root.children.values())
    return {name: ns / total for name, ns in shares.items()}


def agreement(truth: dict[str, float], other: dict[str, float]) -> tuple[float, float]:
    """(Spearman's rho, sum of absolute share differences in points) over the truth's top
    ``TOP``: does ``other`` put them in the same order, with the same shares?"""
    names = [n for n, _ in sorted(truth.items(), key=lambda kv: -kv[1])[:TOP]]
    if len(names) < 2:
        return 1.0, 0.0

    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: -values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):  # ties share their mean rank
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return out

    a = ranks([truth[n] for n in names])
    b = ranks([other.get(n, 0.0) for n in names])
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    var = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    rho = cov / var if var else 0.0
    l1 = sum(abs(truth[n] - other.get(n, 0.0)) for n in names) * 100
    return rho, l1


def _mean_shares(runs: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = collections.defaultdict(float)
    for run in runs:
        for name, share in run.items():
            out[name] += share / len(runs)
    return dict(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--program", choices=("json", "sympy"), default="json")
    parser.add_argument("--tty", action="store_true", help="json.tool's output on a terminal")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool (shares averaged)")
    args = parser.parse_args()
    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    has_perf = tuple(int(p) for p in version.split(".")[:2]) >= (3, 12)
    with tempfile.TemporaryDirectory(prefix="profkit-truth-") as work:
        if args.program == "sympy":
            script = os.path.join(work, "sympy_work.py")
            Path(script).write_text(REAL_PROGRAMS["sympy"])
            scenario = Scenario([script], tty=False, python_only=True)
            title = "sympy (simplify, integrate, factor), Python functions only"
        else:
            source = _json_input(work)
            out = [] if args.tty else [os.path.join(work, "out.json")]
            scenario = Scenario(["-m", "json.tool", source, *out], tty=args.tty, python_only=False)
            title = f"json.tool 8 MB, output to {'a terminal (pty)' if args.tty else 'a file'}"
        scenario.run([args.python, *scenario.program])  # warm the file cache
        # bare: (wall, CPU) of each run, for the wall-time truth on a terminal
        bare: list[tuple[float, float]] = []
        tools: dict[str, Callable[[], dict[str, float]]] = {}
        if has_perf:
            tools[TRUTH] = lambda: perf_shares(args.python, scenario, work)
        tools["cProfile"] = lambda: cprofile_shares(args.python, scenario, work)
        tools["profkit as recorded"] = lambda: profkit_shares(args.python, scenario, work, False)
        tools["profkit compensated"] = lambda: profkit_shares(args.python, scenario, work, True)
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in tools}
        for _ in range(max(args.repeat, 1)):
            bare.append(scenario.run([args.python, *scenario.program]))
            for name, tool in tools.items():  # interleaved: load changes hit every tool
                runs[name].append(tool())
        columns = {k: _mean_shares(v) for k, v in runs.items()}
        if args.tty and TRUTH in columns:
            wall, cpu = min(bare)  # the least disturbed bare run
            waited = f"{TRUTH}, wall"
            columns = {waited: off_cpu_to_write(columns[TRUTH], wall, cpu), **columns}
            print(f"bare run on a terminal: {wall:.2f} s wall (less CPU waits), {cpu:.2f} s CPU")
    print(f"{title}, Python {version}: share of the run by self time, top {TOP} each")
    if not has_perf:
        print("  (no unprofiled column: python -X perf needs 3.12+; see the module docstring)")
    ranked = {k: sorted(v.items(), key=lambda kv: -kv[1])[:TOP] for k, v in columns.items()}
    print("  " + "".join(f"{k:<42}" for k in ranked))
    for i in range(TOP):
        cells = []
        for rows in ranked.values():
            name, share = rows[i] if i < len(rows) else ("", 0.0)
            cells.append(f"{i + 1:>2}. {name[:30]:<30} {100 * share:4.1f}%")
        print("  " + "  ".join(cells))
    truth = columns.get(f"{TRUTH}, wall", columns.get(TRUTH))
    for k, v in columns.items():
        write = v.get("TextIOWrapper.write", 0.0)
        rank = 1 + sum(1 for s in v.values() if s > write)
        line = f"  {k:<20}"
        if not scenario.python_only:
            line += f" TextIOWrapper.write ranks {rank:>2} ({100 * write:4.1f}%)"
        if truth is not None and v is not truth:
            rho, l1 = agreement(truth, v)
            line += (
                f"   vs the truth's top {TOP}: Spearman {rho:+.2f}, sum |share diff| {l1:4.1f} pts"
            )
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Which functions really take the time of ``python -m json.tool`` on 8 MB: a third oracle.

Issue #11 asks that profkit's flat report rank ``TextIOWrapper.write`` among the top three by
self time; profkit and cProfile, both tracing profilers, rank it 4th-6th. Both add a cost to
every call they record, and where that cost lands (mostly in the caller's self time) shifts
the ranking, so neither can settle it. This runs the program *unprofiled* under ``perf``
(``python -X perf``, 3.12+: CPython's perf trampoline names Python frames; DWARF call
graphs), and charges each sample by cProfile's rules: to the C function that cProfile would
report when one is on the stack above the innermost Python frame (``TextIOWrapper.write``,
``isinstance``...: ``C_FUNCS``), else to that Python function. Then cProfile and profkit
run the same program in the same session; all three rankings are printed side by side as
shares of the run.

    python bench/ccall_truth.py                      # this interpreter (3.12+), 8 MB
    python bench/ccall_truth.py --python .venvs/py3.13/bin/python

Needs ``perf`` (linux-perf) and permission to record (``perf_event_paranoid`` <= 2).
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
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from elt_bench import _json_input  # the real-programs section's 8 MB input

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


def perf_shares(python: str, program: list[str], work: str) -> dict[str, float]:
    data = os.path.join(work, "perf.data")
    record = ["perf", "record", "-F", "2000", "--call-graph", "dwarf,16384", "-o", data]
    subprocess.run(
        [*record, "--", python, "-X", "perf", *program],
        check=True,
        capture_output=True,
    )
    script = subprocess.run(
        ["perf", "script", "-i", data], check=True, capture_output=True, text=True
    ).stdout
    counts: collections.Counter[str] = collections.Counter()
    for frames in _samples(script):
        inner = next((i for i, f in enumerate(frames) if f.startswith("py::")), None)
        if inner is None:
            continue  # start-up before any Python frame, exit after the last
        named = [C_FUNCS[f] for f in frames[:inner] if f in C_FUNCS]
        counts[_short(named[-1] if named else frames[inner][4:].rsplit(":", 1)[0])] += 1
    total = sum(counts.values())
    return {name: n / total for name, n in counts.items()}


def cprofile_shares(python: str, program: list[str], work: str) -> dict[str, float]:
    out = os.path.join(work, "c.pstats")
    subprocess.run([python, "-m", "cProfile", "-o", out, *program], check=True)
    stats = pstats.Stats(out)
    raw = stats.stats  # type: ignore[attr-defined]
    shares: dict[str, float] = collections.defaultdict(float)
    for (_, _, name), row in raw.items():
        match = re.match(
            r"<(?:built-in )?method (?:'(\w+)' of '[\w.]*?(\w+)' objects|([\w.]+))>", name
        )
        if match:
            name = f"{match[2]}.{match[1]}" if match[1] else match[3]
        shares[_short(name)] += row[2] / stats.total_tt  # type: ignore[attr-defined]
    return shares


def profkit_shares(python: str, program: list[str], work: str) -> dict[str, float]:
    from profkit.calltree.file import load
    from profkit.calltree.model import CallNode

    out = os.path.join(work, "p.json")
    subprocess.run([python, "-m", "profkit", "run", "--no-tree", "-o", out, *program], check=True)
    profile = load(out)
    shares: dict[str, float] = collections.defaultdict(float)
    total = 0

    def walk(node: CallNode) -> None:
        for child in node.children.values():
            shares[_short(profile.frames[child.frame].name)] += child.exclusive_ns
            walk(child)

    for thread in profile.threads:
        walk(thread.root)
        total += sum(c.inclusive_ns for c in thread.root.children.values())
    return {name: ns / total for name, ns in shares.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="profkit-truth-") as work:
        source = _json_input(work)
        program = ["-m", "json.tool", source, os.path.join(work, "out.json")]
        subprocess.run([args.python, *program], check=True)  # warm the file cache
        columns = {
            "perf (unprofiled)": perf_shares(args.python, program, work),
            "cProfile": cprofile_shares(args.python, program, work),
            "profkit trace": profkit_shares(args.python, program, work),
        }
    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"json.tool 8 MB, Python {version}: share of the run by self time, top {TOP} each")
    ranked = {k: sorted(v.items(), key=lambda kv: -kv[1])[:TOP] for k, v in columns.items()}
    print("  " + "".join(f"{k:<44}" for k in ranked))
    for i in range(TOP):
        cells = []
        for rows in ranked.values():
            name, share = rows[i] if i < len(rows) else ("", 0.0)
            cells.append(f"{i + 1:>2}. {name[:32]:<32} {100 * share:4.1f}%")
        print("  " + "  ".join(cells))
    for k, v in columns.items():
        rank = 1 + sum(1 for s in v.values() if s > v.get("TextIOWrapper.write", 0.0))
        print(
            f"  {k}: TextIOWrapper.write ranks {rank} ({100 * v.get('TextIOWrapper.write', 0):.1f}%)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

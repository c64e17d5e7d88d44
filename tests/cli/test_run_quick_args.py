"""``profkit run``'s command line read without argparse (:func:`profkit.cli.run.quick_args`)
means what argparse makes of it, and everything else is left to argparse."""

from __future__ import annotations

import pytest

from profkit.cli.main import build_parser
from profkit.cli.run import quick_args

ACCEPTED = [
    ["x.py"],
    ["--no-tree", "x.py"],
    ["--no-tree", "--tree", "x.py", "a", "--tree", "-o", "-m"],
    ["-o", "out.json", "--no-subprocesses", "x.py"],
    ["--output=out.json", "--mode", "sample", "--interval", "1ms", "x.py"],
    ["--format", "speedscope", "--prefix=a,b", "--basetime", "2ms", "x.py", "-c"],
    ["-m", "http.server", "8000"],
    ["-c", "print(1)", "a", "b"],
    ["-m", "-c", "pkg", "--help"],
    ["--mode=memory", "--alloc-sample", "64k", "-o", "x", "-o", "y", "prog.py", "-o", "z"],
    ["--udp", "127.0.0.1:9", "--no-compensate", "--c-calls", "x.py", "-"],
    ["x.py", "--version", "-h"],
]

LEFT_TO_ARGPARSE = [
    [],
    ["--no-tree"],
    ["-h"],
    ["--help", "x.py"],
    ["--no-tr", "x.py"],  # an abbreviation
    ["--out", "f", "x.py"],
    ["-ofile", "x.py"],
    ["-o=file", "x.py"],
    ["-mc", "x.py"],
    ["--", "x.py"],
    ["x.py", "--", "a"],
    ["-o", "-x", "x.py"],
    ["-o", "", "x.py"],
    ["--output=", "x.py"],
    ["--output=-x", "x.py"],
    ["--tree=1", "x.py"],
    ["-o"],
    ["--unknown", "x.py"],
    ["-", "a"],
    ["", "a"],
    ["--dotnet", "dotnet", "app.dll"],
    ["--perf-map", "app.dll"],
    ["--version", "x.py"],
]


@pytest.mark.parametrize("argv", ACCEPTED, ids=" ".join)
def test_accepted_command_lines_mean_what_argparse_makes_of_them(argv: list[str]) -> None:
    quick = quick_args(argv)
    assert quick is not None
    parsed = build_parser("run", others=False).parse_args(["run", *argv])
    assert vars(quick) == vars(parsed)


@pytest.mark.parametrize("argv", LEFT_TO_ARGPARSE, ids=" ".join)
def test_everything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert quick_args(argv) is None

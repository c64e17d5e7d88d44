"""One Destination: path, format, children's files, saving and the announcement, all from
the format table (a new format is one row)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from profkit.calltree import file
from profkit.export import registry
from profkit.export.destination import Destination, child_template
from tests.calltree.strategies import sample_profile

#: What the table must still say: the choices before it became the one table (issue 21).
BEFORE_ENDINGS = {
    ".speedscope.json": "speedscope",
    ".gecko.json": "gecko",
    ".trace.json": "chrome",
    ".collapsed.txt": "collapsed",
    ".collapsed": "collapsed",
    ".pb.gz": "pprof",
    ".pstats": "pstats",
    ".html": "html",
}
BEFORE_VIEW = {
    "profile": "profkit report {path}  (or profkit export -F html {path})",
    "html": "open {path} in a browser",
    "speedscope": "open {path} at https://www.speedscope.app",
    "gecko": "open {path} at https://profiler.firefox.com (Load a profile from file)",
    "chrome": "open {path} at https://ui.perfetto.dev (or chrome://tracing)",
    "pstats": "python -m pstats {path}  (or snakeviz {path})",
    "collapsed": "flamegraph.pl {path} > flame.svg  (or inferno-flamegraph)",
    "pprof": "go tool pprof -http=: {path}",
}


@pytest.mark.parametrize(("ending", "name"), sorted(BEFORE_ENDINGS.items()))
def test_an_ending_names_its_format(ending: str, name: str) -> None:
    assert Destination.decide(f"out{ending}", "", "x").format.name == name
    assert Destination.decide(f"OUT{ending.upper()}", "", "x").format.name == name


@pytest.mark.parametrize("output", ["out.json", "out.json.gz", "out.prof", "out", None, "d/"])
def test_any_other_name_is_profkits_own(output: str | None, tmp_path: Path) -> None:
    where = Destination.decide(output, "", "app", str(tmp_path))
    assert where.format is registry.NATIVE
    if output in (None, "d/"):
        name = os.path.basename(where.path)
        assert re.fullmatch(rf"profkit-app-{os.getpid()}-[0-9a-f]{{8}}\.json", name)


def test_an_explicit_format_wins_and_names_the_default_ending() -> None:
    where = Destination.decide(None, "pprof", "app")
    assert where.format.name == "pprof" and where.path.endswith(".pb.gz")
    assert Destination.decide("a.html", "pstats", "app").format.name == "pstats"


def test_every_view_hint_is_the_one_said_before() -> None:
    for f in registry.FORMATS:
        where = Destination(f"p{f.extension}", f)
        assert where.view_hint() == BEFORE_VIEW[f.name].format(path=where.path)
        assert where.announcement() == (
            f"profkit: profile saved to {where.path}\nprofkit: view it: {where.view_hint()}\n"
        )


@pytest.mark.parametrize(
    ("name", "child"),
    [
        ("out.json", "out.{pid}.json"),
        ("d/out.json.gz", "d/out.{pid}.json.gz"),
        ("o.pb.gz", "o.{pid}.pb.gz"),
        ("o.speedscope.json", "o.{pid}.speedscope.json"),
        ("o.trace.json", "o.{pid}.trace.json"),
        ("o.collapsed.txt", "o.{pid}.collapsed.txt"),
        (".json.gz", ".json.{pid}.gz"),
        ("noext", "noext.{pid}.json"),
    ],
)
def test_children_keep_compound_endings_whole(name: str, child: str) -> None:
    assert child_template(name) == child


def test_compound_endings_are_the_tables_two_suffix_endings() -> None:
    assert set(registry.COMPOUND_ENDINGS) == {
        ".json.gz",
        ".speedscope.json",
        ".gecko.json",
        ".trace.json",
        ".collapsed.txt",
        ".pb.gz",
    }


def test_a_child_destination_is_beside_the_parent_in_its_format(tmp_path: Path) -> None:
    parent = Destination.decide(str(tmp_path / "run.html"), "", "app")
    child = parent.child(123)
    assert child.path == str(tmp_path / "run.123.html") and child.format.name == "html"


def test_save_writes_each_format_and_reports_a_failure(tmp_path: Path) -> None:
    profile = sample_profile()
    for f in registry.FORMATS:
        where = Destination.decide(str(tmp_path / f"p{f.extension}"), f.name, "app")
        assert where.save(profile) is None
        assert Path(where.file).stat().st_size > 0
    native = Destination.decide(str(tmp_path / "p.json.gz"), "", "app")
    assert native.save(profile) is None
    assert len(file.load(native.file).threads) == len(profile.threads)
    missing = Destination.decide(str(tmp_path / "no" / "p.json"), "", "app")
    assert missing.save(profile) == "No such file or directory"


def test_format_help_is_generated_from_the_table() -> None:
    assert registry.format_help() == (
        "what to write: profile (profkit's own, the default) or html, speedscope, gecko, "
        "chrome, pstats, collapsed, pprof; by default -o's ending decides (out.html, "
        "out.speedscope.json, out.gecko.json, out.trace.json, out.pstats, out.collapsed, "
        "out.pb.gz)"
    )

"""What the HTML page embeds (:mod:`profkit.export.html_data`): own frames, short
``file:line``, the node budget and the timeline's spans."""

from __future__ import annotations

from profkit.calltree.model import CallNode, CallProfile, Frame, Span, ThreadTree
from profkit.export.html_data import page_data
from tests.export.test_html_chromium import app_profile

STDLIB = "/usr/lib/python3.11/json/"


def _chain(profile: CallProfile, frames: list[int], ns: int = 10) -> None:
    node = profile.threads[0].root
    node.inclusive_ns = ns
    for f in frames:
        node = node.child(f)
        node.calls, node.inclusive_ns = 1, ns
    node.exclusive_ns = ns


def _by_name(doc: dict[str, object], key: str) -> dict[str, object]:
    names = doc["names"]
    values = doc[key]
    assert isinstance(names, list) and isinstance(values, list)
    return dict(zip(names, values, strict=True))


def test_own_frames_short_paths_and_packages() -> None:
    doc = page_data(app_profile())
    own = _by_name(doc, "own")
    assert own["__main__.main"] == 1 and own["__main__.on_item"] == 1
    assert own["fancylib.core.walk"] == 0 and own["importlib._bootstrap._find_and_load"] == 0
    where = _by_name(doc, "where")
    assert where["__main__.main"] == "app.py:10"
    assert where["fancylib.core.walk"] == "fancylib/core.py:40"
    assert where["json.encoder.JSONEncoder.encode"] == "json/encoder.py:183"
    assert where["builtins.len"] == ""
    pkg = _by_name(doc, "pkg")
    assert (
        pkg["builtins.len"] == "<built-in>"
        and pkg["importlib._bootstrap._load_unlocked"] == "<import>"
    )
    hot = {doc["names"][f]: ns for f, ns in doc["threads"][0]["hot"]}  # type: ignore[index]
    assert hot["__main__.crunch"] == 30_000_000


def test_a_module_run_with_m_is_the_program() -> None:
    """``-m json.tool``: no ``__main__`` frame, the started file's frames are the program's."""
    frames = [
        Frame("json.tool.main", STDLIB + "tool.py", 19),
        Frame("json.dump", STDLIB + "__init__.py", 120),
    ]
    p = CallProfile("trace", frames, [ThreadTree(1, "MainThread", CallNode(-1))])
    p.metadata["argv"] = [STDLIB + "tool.py", "x.json"]
    _chain(p, [0, 1])
    doc = page_data(p)
    assert _by_name(doc, "own") == {"json.tool.main": 1, "json.dump": 0}
    assert _by_name(doc, "where")["json.dump"] == "json/__init__.py:120"


def test_dotnet_frames_fold_the_framework() -> None:
    frames = [Frame("Program.Main"), Frame("System.Linq.Enumerable.Sum"), Frame("App.Work.Step")]
    p = CallProfile("sample", frames, [ThreadTree(1, "Main Thread", CallNode(-1))])
    _chain(p, [0, 1, 2])
    assert _by_name(page_data(p), "own") == {
        "Program.Main": 1,
        "System.Linq.Enumerable.Sum": 0,
        "App.Work.Step": 1,
    }


def test_the_budget_keeps_the_largest_nodes_and_counts_the_rest() -> None:
    whole = page_data(app_profile())
    assert whole["left"] == {"nodes": 0, "ns": 0, "largest": 0, "spans": 0}
    doc = page_data(app_profile(), max_nodes=3)
    rows = doc["threads"][0]["nodes"]  # type: ignore[index]
    names = [doc["names"][r[1]] for r in rows[1:]]  # type: ignore[index]
    assert names == ["__main__.<module>", "__main__.main", "fancylib.core.walk"]
    assert all(rows[r[0]][2] >= r[2] for r in rows[1:])  # parents come first, and are larger
    left = doc["left"]
    # left out: _find_and_load, crunch, encode under main, and visit (44 ms) under walk
    assert left["nodes"] == 4 and left["largest"] == 44_000_000  # type: ignore[index]


def test_spans_drop_profkits_frames_and_start_at_depth_zero() -> None:
    p = app_profile()
    p.frames.append(Frame("profkit.runner.inprocess.run", "/x/profkit/runner/inprocess.py", 1))
    runner = len(p.frames) - 1
    p.spans = [
        Span(0, runner, 0, 100, 0),
        Span(0, 0, 0, 100, 1),
        Span(0, 1, 10, 90, 2),
        Span(0, 2, 5, 5, 3),
    ]
    doc = page_data(p)
    spans = [[doc["names"][s[1]], s[2], s[3], s[4]] for s in doc["spans"]]  # type: ignore[index]
    assert spans == [["__main__.<module>", 0, 100, 0], ["__main__.main", 10, 90, 1]]
    memory = app_profile("memory")
    memory.spans = p.spans
    assert page_data(memory)["spans"] == []
